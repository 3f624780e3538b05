"""State shared by the parts of the daemon, and the small helpers they all use.

The daemon is one object assembled from mixins by concept: user commands
(``hpcdet.daemon.commands``), submission to the scheduler (``hpcdet.daemon.submission``)
and the loop that watches runs (``hpcdet.daemon.service``). Methods one part calls in
another are declared here.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hpcdet.config import ExperimentConfig
from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.ingest import Ingestor
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.searching import SearchDriver
from hpcdet.daemon.submit import layout
from hpcdet.errors import SchedulerCommandError, StoreError, disk_full_cause
from hpcdet.paths import StatePaths
from hpcdet.schedulers import JobStatus, Scheduler, make_scheduler
from hpcdet.schedulers.base import Partition, fit_problem
from hpcdet.schedulers.runner import CommandRunner
from hpcdet.schedulers.slurm import parse_config_limits
from hpcdet.states import FINAL_EXPERIMENT_STATES, Decision, ExperimentState, JobState
from hpcdet.store.models import Checkpoint, Experiment, Run
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)

LOCAL_POLL_SECONDS = 1.0
# An experiment whose steps keep failing with an I/O error ends in ERROR once the errors have
# gone on for this many rounds in a row and this long; shorter trouble is retried.
IO_RETRY_ROUNDS = 5
IO_RETRY_SECONDS = 120.0


class DaemonBase:
    """The daemon's state; see the module docstring."""

    def __init__(
        self, paths: StatePaths, cluster: ClusterConfig, runner: CommandRunner | None = None
    ) -> None:
        self.paths = paths
        self.cluster = cluster
        self.store = Store(paths.database())
        self.journal = Journal(paths, self.store)
        self.ingestor = Ingestor(self.store)
        self.runner = runner or CommandRunner()
        self.scheduler: Scheduler = make_scheduler(
            cluster.backend,
            {"jobs_dir": str(paths.local_dir() / "local-jobs"),
             "template_dir": cluster.template_dir},
        )
        self.backend = self.scheduler.name
        if self.backend == "local":
            self.poll_interval = LOCAL_POLL_SECONDS
        else:
            self.poll_interval = max(5.0, float(cluster.min_poll_interval))
        self.configs: dict[int, ExperimentConfig] = {}
        self.limits: dict[str, int] = {}
        self.partitions: dict[str, Partition] = {}
        self.canceled: set[str] = set()  # asked once; scancel is not repeated every tick
        self.rounds = 0  # reconciles and ticks begun
        # experiment -> (last round, rounds in a row, since when) its steps failed with OSError
        self.io_failures: dict[int, tuple[int, int, float]] = {}
        self.io_retry_rounds = IO_RETRY_ROUNDS
        self.io_retry_seconds = IO_RETRY_SECONDS
        self.nice_refused: set[tuple[str, int]] = set()  # (job, nice) the scheduler refused
        self.statuses: dict[str, JobStatus] = {}
        self.missing: dict[str, int] = {}
        self.preempt_asked: dict[tuple[int, int], float] = {}
        self.controls: dict[tuple[int, int], dict[str, Any]] = {}
        # (trial, run): the last event this daemon has considered feeding to the searcher
        self.considered: dict[tuple[int, int], int] = {}
        self.search = SearchDriver(self.store, self.journal)
        self.submissions: deque[float] = deque()
        self.started = time.time()
        self.last_poll = 0.0
        self.last_tick = 0.0
        self.last_heartbeat = 0.0
        self.polls = 0
        self.settled = False  # submissions a killed daemon left without a job id
        self.stopping = False

    def _config(self, exp: Experiment) -> ExperimentConfig:
        """The experiment's config; validated once per daemon and experiment."""
        cfg = self.configs.get(exp.id)
        if cfg is None:
            cfg = self.configs[exp.id] = ExperimentConfig.from_dict(json.loads(exp.config_json))
        return cfg

    @contextmanager
    def _guard(self, exp_id: int, step: str) -> Iterator[None]:
        """One experiment's part of a step: if it fails, that experiment ends in ERROR with
        the reason, and the step goes on for the others.

        A database error or a full disk is the daemon's, not the experiment's: it propagates
        to the loop's back-off, and the step is tried again once the cause is gone. So does
        any other I/O error (an NFS server that stalls or restarts) until it has lasted
        ``io_retry_rounds`` rounds and ``io_retry_seconds``: then it is the experiment's, which
        must not hold up the others for ever.
        """
        try:
            yield
        except StoreError:
            raise
        except Exception as e:
            if disk_full_cause(e) is not None:
                raise
            if isinstance(e, OSError) and self._retry_io(exp_id):
                log.warning("experiment %d: %s failed; retried next round: %s", exp_id, step, e)
                raise
            log.exception("experiment %d: %s failed", exp_id, step)
            self._fail(exp_id, f"{step} failed: {e.__class__.__name__}: {e}")

    def _retry_io(self, exp_id: int) -> bool:
        """Whether an I/O error of this experiment's, in this round, is still retried."""
        last, count, since = self.io_failures.get(exp_id, (-1, 0, time.time()))
        if last < self.rounds - 1:  # the last trouble passed: this is a new one
            count, since = 0, time.time()
        if last != self.rounds:
            count += 1
        self.io_failures[exp_id] = (self.rounds, count, since)
        return count < self.io_retry_rounds or time.time() - since < self.io_retry_seconds

    def _fail(self, exp_id: int, message: str) -> None:
        """End the experiment in ERROR: one decision, STOPPING_ERROR with the reason, and the
        usual stopping from there (its runs canceled or preempted every round, again after a
        restart, until they have ended; ``_finish`` then makes it ERROR).

        If stopping fails too (a stored config that no longer loads, say), it ends at once:
        its live runs are marked canceled and their jobs asked to cancel one last time.
        """
        try:
            self.journal.replay(exp_id)  # it may be what failed, before its experiment's row
            exp = self.store.experiment(exp_id)
            if exp.state in FINAL_EXPERIMENT_STATES:
                return
            trial_ids = [t.id for t in self.store.trials(exp_id)]
            jobs = [r.job_id for r in self.store.runs(trial_ids, live_only=True) if r.job_id]
            if exp.state == ExperimentState.STOPPING_ERROR:
                self.journal.record(exp_id, "experiment_failed",
                                    message=f"{exp.error}; stopping it failed too: {message}")
            else:
                self.journal.record(exp_id, "experiment_state",
                                    state=ExperimentState.STOPPING_ERROR, cascade=True,
                                    reason=message, error=message)
            self.search.forget(exp_id)
            self._cancel(jobs + [a.job_id for a in self.store.arrays(exp_id)])
            exp = self.store.experiment(exp_id)
            if exp.state not in FINAL_EXPERIMENT_STATES:
                self._finish(exp)  # ends it at once if nothing runs
        except StoreError:
            raise
        except Exception:
            log.exception("experiment %d: could not record its failure", exp_id)

    def _exp_id(self, run: Run) -> int:
        return self.store.trial(run.trial_id).experiment_id

    def _record_run_end(
        self, exp_id: int, run: Run, decision: Decision, *, job_state: JobState, outcome: str,
        exit_code: int | None = None,
    ) -> None:
        """A run's end and what its trial does next: one decision, one journal entry."""
        self.journal.record(
            exp_id, "run_ended", trial_id=run.trial_id, run_id=run.run_id, exit_code=exit_code,
            job_state=job_state, outcome=outcome, trial_state=decision.trial_state,
            restarts=decision.restarts, reason=decision.reason,
        )

    def _run(self, trial_id: int, run_id: int) -> Run | None:
        for run in self.store.runs([trial_id]):
            if run.run_id == run_id:
                return run
        return None

    def _cancel(self, job_ids: list[str]) -> None:
        job_ids = [j for j in job_ids if j not in self.canceled]
        if not job_ids:
            return
        self.canceled.update(job_ids)
        try:
            self.runner.run(self.scheduler.cancel_command(job_ids))
        except SchedulerCommandError as e:
            self.canceled.difference_update(job_ids)  # asked again by whoever still wants it
            log.warning("cancel of %s failed: %s", job_ids, e)

    def _read_site(self) -> None:
        """What the scheduler offers: partitions (to refuse trials that can never fit, and to
        know which have GPUs) and, on Slurm, limits and whether accounting exists."""
        cmd = self.scheduler.partitions_command()
        if cmd is not None:
            try:
                parts = self.scheduler.parse_partitions(self.runner.run(cmd).stdout)
                self.partitions = {p.name: p for p in parts}
            except SchedulerCommandError as e:
                log.warning("could not list partitions: %s", e)
        if self.backend != "slurm":
            return
        try:
            out = self.runner.run(["scontrol", "show", "config"]).stdout
        except SchedulerCommandError as e:
            log.warning("could not read the Slurm configuration: %s", e)
            return
        limits = parse_config_limits(out)
        storage = limits.get("AccountingStorageType", "")
        self.scheduler.settings["accounting"] = bool(storage) and not storage.endswith("/none")
        for key in ("MaxArraySize", "MaxJobCount"):
            if limits.get(key, "").isdigit():
                self.limits[key] = int(limits[key])

    def _partition_name(self, cfg: ExperimentConfig) -> str:
        """The partition the experiment's jobs go to ('' if unknown, e.g. on local)."""
        name = cfg.slurm.partition or self.cluster.partition_for(cfg.resources.resource_pool)
        if name is None:
            return next((p.name for p in self.partitions.values() if p.default), "")
        return name

    def _partition(self, cfg: ExperimentConfig) -> Partition | None:
        """The partition the experiment's jobs go to, if the scheduler told us about it."""
        return self.partitions.get(self._partition_name(cfg))

    def _gpus(self, cfg: ExperimentConfig) -> bool:
        partition = self._partition(cfg)
        return partition is not None and partition.gpus_per_node > 0

    def _fit_problem(self, cfg: ExperimentConfig) -> str | None:
        partition = self._partition(cfg)
        if partition is None:
            return None
        return fit_problem(*layout(cfg, self.backend), partition)

    # Implemented by the other parts (see the module docstring).

    def _submit_queued(self) -> None:
        raise NotImplementedError

    def _sync_controls(self) -> None:
        raise NotImplementedError

    def poll_scheduler(self) -> bool:
        raise NotImplementedError

    def _sync_control(self, run: Run, best: dict[int, float | None] | None = None) -> None:
        raise NotImplementedError

    def _delete_checkpoint(self, ckpt: Checkpoint) -> None:
        raise NotImplementedError

    def _finish(self, exp: Experiment) -> None:
        raise NotImplementedError
