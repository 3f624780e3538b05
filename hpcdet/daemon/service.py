"""The per-user daemon: the only writer of the database and the only caller of the scheduler.

One loop, every ``LOOP_SECONDS``: answer requests, ingest trial events, notice ended runs,
submit queued trials (rate-limited), and every poll interval ask the scheduler once about all
of the user's jobs.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections import deque
from pathlib import Path
from typing import Any

from hpcdet.config import ExperimentConfig
from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon import requests as req
from hpcdet.daemon.arrays import next_chunk, owner
from hpcdet.daemon.ingest import Ingestor
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.searching import SearchDriver, searcher_source
from hpcdet.daemon.submit import array_request, checkpoint_dir, job_request, run_spec
from hpcdet.errors import HpcdetError, NotFoundError, SchedulerCommandError, StateError
from hpcdet.exchange import Event, read_events, read_json, write_atomic
from hpcdet.gc import CheckpointRecord, RetentionPolicy, ValidationRecord, checkpoints_to_delete
from hpcdet.lifecycle import FINAL_TRIAL_STATES, RunEnd, decide_run_end, experiment_end_state
from hpcdet.paths import StatePaths, hostname
from hpcdet.runspec import CONTROL_FILE, EVENTS_FILE, EXIT_FILE
from hpcdet.schedulers import JobState, JobStatus, Scheduler, make_scheduler
from hpcdet.schedulers.base import ArraySpec
from hpcdet.schedulers.runner import CommandRunner
from hpcdet.schedulers.slurm import parse_config_limits
from hpcdet.search.base import (
    EXIT_CANCELED,
    EXIT_COMPLETED,
    EXIT_ERRORED,
    EXIT_INVALID_HP,
    EXIT_USER_STOP,
    Initialize,
    OpCompleted,
    TrialExited,
    ValidationReported,
)
from hpcdet.search.base import Event as SearchEvent
from hpcdet.store.models import Checkpoint, Experiment, Run, Trial
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)

LOOP_SECONDS = 0.25
HEARTBEAT_SECONDS = 30.0
LOCAL_POLL_SECONDS = 1.0
MISSING_POLLS_BEFORE_VANISHED = 2


class Daemon:
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
        self.canceled: set[str] = set()  # asked once; scancel is not repeated every tick
        self.statuses: dict[str, JobStatus] = {}
        self.missing: dict[str, int] = {}
        self.preempt_asked: dict[tuple[int, int], float] = {}
        self.controls: dict[tuple[int, int], dict[str, Any]] = {}
        self.search = SearchDriver(self.store, self.journal)
        self.submissions: deque[float] = deque()
        self.started = time.time()
        self.last_poll = 0.0
        self.last_tick = 0.0
        self.last_heartbeat = 0.0
        self.polls = 0
        self.stopping = False

    # ---------------------------------------------------------------- lifecycle of the loop

    def serve(self) -> None:
        self.reconcile()
        failures = 0
        while not self.stopping:
            try:
                self.tick()
                failures = 0
            except Exception:
                # Keep serving: the state is in the run tree and the database; a bug in one
                # tick must not orphan running jobs. Back off while it repeats.
                failures += 1
                log.exception("tick failed (%d in a row)", failures)
                time.sleep(min(30.0, LOOP_SECONDS * 2**failures))
            time.sleep(LOOP_SECONDS)
        self.write_status()

    def reconcile(self) -> None:
        """Catch up with the run tree and the scheduler after a start or a crash."""
        self._detect_accounting()
        applied = self.journal.replay_all()
        log.info("journal replay applied %d entries", applied)
        for exp in self.store.experiments(unfinished=True):
            self.search.carry_out(exp, self._config(exp))
        for run in self.store.runs():  # a rebuilt database has every event log still to read
            self._ingest(run)
        for run in self.store.runs(live_only=True):
            # Events ingested before a crash may not have reached the searcher yet.
            self._refeed(run)
        self._report_exits()
        self.poll_scheduler()
        for run in self.store.runs(live_only=True):
            if run.state == "SUBMITTING":
                self._adopt_or_requeue(run)

    def _detect_accounting(self) -> None:
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

    def tick(self) -> None:
        now = time.time()
        req.serve_pending(self.paths, self.handle)
        live = self.store.runs(live_only=True)
        for run in live:
            self._ingest(run)
        # Poll while jobs live, and while a search waits for its next array to be due.
        busy = live or any(e.state == "ACTIVE" for e in self.store.experiments(unfinished=True))
        if busy and now - self.last_poll >= self.poll_interval:
            self.poll_scheduler()
        for run in self.store.runs(live_only=True):
            self._check_end(run)
        self._report_exits()
        self._sync_controls()
        self._escalate_preemptions()
        self._submit_queued()
        self._finish_experiments()
        self.last_tick = time.time()
        self.write_status()

    # ---------------------------------------------------------------- requests from the CLI

    def handle(self, op: str, args: dict[str, Any]) -> Any:
        handler = getattr(self, f"op_{op}", None)
        if handler is None:
            raise HpcdetError(f"unknown request {op!r}")
        return handler(**args)

    def op_ping(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "host": hostname()}

    def op_shutdown(self) -> str:
        self.stopping = True
        return "stopping"

    def op_create(self, config: dict[str, Any], staging: str) -> dict[str, Any]:
        raw = ExperimentConfig.from_dict(config).to_dict()
        if not raw.get("checkpoint_storage"):
            raw["checkpoint_storage"] = {
                "type": "shared_fs", "host_path": str(self.paths.default_checkpoints()),
            }
        cfg = ExperimentConfig.from_dict(raw)
        raw = cfg.to_dict()
        exp_id = self.journal.max_ids()[0] + 1
        exp_dir = self.paths.experiment(exp_id)
        exp_dir.mkdir(parents=True)
        os.replace(staging, self.paths.context(exp_id))
        write_atomic(exp_dir / "experiment.json", {"id": exp_id, "config": raw})
        self.journal.record(
            exp_id, "experiment_created", name=cfg.name, config=raw,
            description=cfg.description, backend=self.backend,
            resource_pool=cfg.resources.resource_pool, priority=cfg.resources.priority,
            searcher=cfg.searcher.name,
        )
        exp = self.store.experiment(exp_id)
        self.search.feed(exp, cfg, Initialize(), None)
        self._submit_queued()
        trials = self.store.trials(exp_id)
        reasons = [self.store.experiment(exp_id).error]
        reasons += [t.end_reason for t in trials if t.state == "ERROR"]
        warning = "; ".join(r for r in reasons if r)
        return {"experiment_id": exp_id, "trial_ids": [t.id for t in trials],
                "warning": warning}

    def op_pause(self, exp_id: int) -> str:
        exp = self.store.experiment(exp_id)
        if exp.state != "ACTIVE":
            raise StateError(f"experiment {exp_id} is {exp.state}; only ACTIVE ones can pause")
        self.journal.record(exp_id, "experiment_state", state="PAUSED")
        for trial in self.store.trials(exp_id):
            if trial.state == "QUEUED":
                self.journal.record(exp_id, "trial_state", trial_id=trial.id, state="PAUSED")
            elif trial.state == "ACTIVE":
                self._stop_run(exp_id, trial, graceful=True)
        self._sync_controls()
        return f"Paused experiment {exp_id}"

    def op_activate(self, exp_id: int) -> str:
        exp = self.store.experiment(exp_id)
        if exp.state == "ACTIVE":
            return f"Activated experiment {exp_id}"
        if exp.state != "PAUSED":
            raise StateError(f"experiment {exp_id} is {exp.state}; only PAUSED ones can activate")
        self.journal.record(exp_id, "experiment_state", state="ACTIVE")
        for trial in self.store.trials(exp_id):
            if trial.state == "PAUSED":
                self.journal.record(exp_id, "trial_state", trial_id=trial.id, state="QUEUED",
                                    restarts=trial.restarts)
        self._sync_controls()
        self._submit_queued()
        return f"Activated experiment {exp_id}"

    def op_cancel(self, exp_id: int) -> str:
        """Graceful stop: running trials checkpoint and exit; nothing new starts."""
        exp = self.store.experiment(exp_id)
        if exp.state in ("COMPLETED", "CANCELED", "ERROR"):
            return f"Canceled experiment {exp_id}"
        self.journal.record(exp_id, "experiment_state", state="STOPPING_CANCELED")
        for trial in self.store.trials(exp_id):
            if trial.state == "ACTIVE":
                self._stop_run(exp_id, trial, graceful=True)
            elif trial.state not in FINAL_TRIAL_STATES:
                self.journal.record(exp_id, "trial_state", trial_id=trial.id, state="CANCELED",
                                    reason="canceled by the user", restarts=trial.restarts)
        self._sync_controls()
        return f"Canceled experiment {exp_id}"

    def op_continue(self, exp_id: int, config: dict[str, Any] | None = None) -> str:
        """Determined's `experiment continue`: same experiment and trials, resumed from their
        latest checkpoints with restarts reset."""
        exp = self.store.experiment(exp_id)
        if exp.state not in ("COMPLETED", "CANCELED", "ERROR"):
            raise StateError(f"experiment {exp_id} is {exp.state}; only a finished experiment "
                             "can continue (pause/activate resume a running one)")
        name = self._config(exp).searcher.name
        if name not in ("single", "random", "grid"):
            raise StateError(f"Unsupported searcher type provided: '{name}'; only single, "
                             "random and grid experiments can continue")
        if config is not None and name != "single":
            raise StateError("config overrides are only allowed when continuing an experiment "
                             "with the single searcher")
        trials = self.store.trials(exp_id)
        again = trials if name == "single" else [t for t in trials if t.state != "COMPLETED"]
        if not again:
            raise StateError("experiment has been completed, cannot continue this experiment")
        if config is not None:
            cfg = ExperimentConfig.from_dict(config)
            self.journal.record(exp_id, "experiment_config", config=cfg.to_dict())
            self.configs.pop(exp_id, None)
        for trial in again:
            self.journal.record(exp_id, "trial_continued", trial_id=trial.id)
        self.journal.record(exp_id, "experiment_state", state="ACTIVE")
        self._submit_queued()
        return f"Continued experiment {exp_id}"

    def op_continue_trial(self, trial_id: int) -> dict[str, Any]:
        """The WebUI's Continue Trial: a new single-trial experiment warm-started from the
        trial's latest checkpoint, with its hyperparameters fixed."""
        trial = self.store.trial(trial_id)
        exp = self.store.experiment(trial.experiment_id)
        raw = self._config(exp).to_dict()
        searcher = raw["searcher"]
        raw["searcher"] = {
            "name": "single", "metric": searcher["metric"],
            "smaller_is_better": searcher.get("smaller_is_better", True),
            "source_trial_id": trial.id, "source_checkpoint_uuid": trial.latest_checkpoint,
            **({"max_length": searcher["max_length"]} if searcher.get("max_length") else {}),
        }
        raw["hyperparameters"] = json.loads(trial.hparams_json)
        staging = self.paths.requests / f"continue-{trial_id}-{time.time():.0f}.context"
        shutil.copytree(self.paths.context(exp.id), staging)
        return self.op_create(raw, str(staging))

    def op_kill(self, exp_id: int) -> str:
        exp = self.store.experiment(exp_id)
        if exp.state in ("COMPLETED", "CANCELED", "ERROR"):
            return f"Killed experiment {exp_id}"
        self.journal.record(exp_id, "experiment_state", state="STOPPING_CANCELED")
        for trial in self.store.trials(exp_id):
            if trial.state == "ACTIVE":
                self._stop_run(exp_id, trial, graceful=False)
            elif trial.state not in FINAL_TRIAL_STATES:
                self.journal.record(exp_id, "trial_state", trial_id=trial.id, state="CANCELED",
                                    reason="killed by the user", restarts=trial.restarts)
        return f"Killed experiment {exp_id}"

    # ---------------------------------------------------------------- runs

    def _stop_run(self, exp_id: int, trial: Trial, graceful: bool) -> None:
        run = self._run(trial.id, trial.run_id)
        if run is None:
            return
        started = (self.paths.run(exp_id, trial.id, run.run_id) / "nodes").exists()
        # A job that has not started cannot checkpoint: cancel it. One that has gets a
        # preemption request through its control file (_sync_controls).
        if not (graceful and started) and run.job_id:
            self._cancel([run.job_id])

    def _cancel(self, job_ids: list[str]) -> None:
        job_ids = [j for j in job_ids if j not in self.canceled]
        if not job_ids:
            return
        self.canceled.update(job_ids)
        try:
            self.runner.run(self.scheduler.cancel_command(job_ids))
        except SchedulerCommandError as e:
            log.warning("cancel of %s failed: %s", job_ids, e)

    def _config(self, exp: Experiment) -> ExperimentConfig:
        """The experiment's config; validated once per daemon and experiment."""
        cfg = self.configs.get(exp.id)
        if cfg is None:
            cfg = self.configs[exp.id] = ExperimentConfig.from_dict(json.loads(exp.config_json))
        return cfg

    def _run(self, trial_id: int, run_id: int) -> Run | None:
        for run in self.store.runs([trial_id]):
            if run.run_id == run_id:
                return run
        return None

    def _ingest(self, run: Run, events: list[Event] | None = None) -> None:
        trial = self.store.trial(run.trial_id)
        exp = self.store.experiment(trial.experiment_id)
        cfg = self._config(exp)
        path = self.paths.run(exp.id, trial.id, run.run_id) / EVENTS_FILE
        new = self.ingestor.ingest((trial.id, run.run_id), path, cfg.searcher)
        self._feed_trial_events(exp, cfg, trial, run, events if events is not None else new)

    def _feed_trial_events(
        self, exp: Experiment, cfg: ExperimentConfig, trial: Trial, run: Run, events: list[Event]
    ) -> None:
        """Feed the searcher what it decides on: validations (0.38) and completed ops (0.37)."""
        if exp.searcher_done or exp.state not in ("ACTIVE", "PAUSED"):
            return
        run = self._run(run.trial_id, run.run_id) or run
        wants_validations = bool(cfg.searcher.time_metric)
        for ev in events:
            if ev.seq <= run.searcher_seq:
                continue
            source = searcher_source(trial.id, run.run_id, ev.seq)
            if ev.type == "metrics" and ev.body["group"] == "validation" and wants_validations:
                event: SearchEvent = ValidationReported(trial.request_id, ev.body["metrics"])
            elif ev.type == "searcher_completed":
                event = OpCompleted(trial.request_id, ev.body["length"], ev.body["metric"])
            else:
                continue
            self.search.feed(exp, cfg, event, source)
            exp = self.store.experiment(exp.id)
            if exp.searcher_done:
                return

    def _refeed(self, run: Run) -> None:
        trial = self.store.trial(run.trial_id)
        path = self.paths.run(trial.experiment_id, trial.id, run.run_id) / EVENTS_FILE
        if run.searcher_seq < run.event_seq:
            self._ingest(run, [e for e in read_events(path, 0) if e.seq <= run.event_seq])

    def _sync_controls(self) -> None:
        """Make every live run's control file say what the run should do now."""
        best: dict[int, float | None] = {}
        for run in self.store.runs(live_only=True):
            self._sync_control(run, best)

    def _sync_control(self, run: Run, best: dict[int, float | None] | None = None) -> None:
        best = {} if best is None else best
        trial = self.store.trial(run.trial_id)
        exp = self.store.experiment(trial.experiment_id)
        run_dir = self.paths.run(exp.id, trial.id, run.run_id)
        started = (run_dir / "nodes").exists()
        preempt, reason = False, ""
        if trial.stop_requested:
            preempt, reason = True, "stopped early by the searcher"
            if not started and run.job_id:
                self._cancel([run.job_id])  # it has not started: it need not run at all
        elif exp.state == "PAUSED" and started:
            preempt, reason = True, "the experiment was paused"
        elif exp.state == "STOPPING_CANCELED" and started:
            preempt, reason = True, "the experiment was canceled"
        if exp.id not in best:
            best[exp.id] = self._best(exp)
        control: dict[str, Any] = {
            "preempt": preempt, "reason": reason, "best_validation": best[exp.id],
        }
        ops = json.loads(trial.ops_json)
        if ops:
            control.update(ops=ops[run.first_op:], decided=run.ops_decided)
        key = (trial.id, run.run_id)
        if self.controls.get(key) != control:
            write_atomic(run_dir / CONTROL_FILE, control)
            self.controls[key] = control
        if preempt:
            self.preempt_asked.setdefault(key, time.time())
        else:
            self.preempt_asked.pop(key, None)

    def _best(self, exp: Experiment) -> float | None:
        values = [t.best_validation for t in self.store.trials(exp.id)
                  if t.best_validation is not None]
        if not values:
            return None
        return min(values) if self._config(exp).searcher.smaller_is_better else max(values)

    def poll_scheduler(self) -> None:
        """One status query for all of the user's jobs."""
        self.last_poll = time.time()
        live = [r.job_id for r in self.store.runs(live_only=True) if r.job_id]
        try:
            result = self.runner.run(self.scheduler.status_command(live))
        except SchedulerCommandError as e:
            # Back off: the next poll waits twice as long, up to five minutes.
            self.last_poll += min(300.0, self.poll_interval)
            log.warning("scheduler status query failed: %s", e)
            return
        self.polls += 1
        self.statuses = self.scheduler.parse_status(result.stdout)
        gone = [j for j in live if j not in self.statuses]
        final_cmd = self.scheduler.final_status_command(gone)
        if final_cmd is not None:
            try:
                out = self.runner.run(final_cmd).stdout
                self.statuses.update(self.scheduler.parse_final_status(out))
            except SchedulerCommandError as e:
                log.warning("accounting query failed: %s", e)
        for job_id in live:
            self.missing[job_id] = 0 if job_id in self.statuses else self.missing.get(job_id, 0) + 1
        for run in self.store.runs(live_only=True):
            status = self.statuses.get(run.job_id)
            if status is not None and not status.state.is_final:
                self._set_run_state(run, status.state.value, status.reason)

    def _set_run_state(self, run: Run, state: str, reason: str) -> None:
        if (run.state, run.reason) == (state, reason):
            return
        with self.store.session() as s:
            row = s.get(Run, run.id)
            if row is not None and row.state in ("PENDING", "RUNNING"):
                row.state, row.reason = state, reason
                s.add(row)

    def _check_end(self, run: Run) -> None:
        trial = self.store.trial(run.trial_id)
        exp_id = trial.experiment_id
        run_dir = self.paths.run(exp_id, trial.id, run.run_id)
        exit_info = read_json(run_dir / EXIT_FILE)
        status = self.statuses.get(run.job_id)
        vanished = self.missing.get(run.job_id, 0) >= MISSING_POLLS_BEFORE_VANISHED
        if exit_info is None and not (status and status.state.is_final) and not vanished:
            return
        if run.state == "SUBMITTING":
            return
        self._ingest(run)
        run = self._run(run.trial_id, run.run_id) or run
        exit_code = exit_info.get("exit_code") if exit_info else None
        if status and status.state.is_final:
            job_state = status.state
        elif exit_info is not None:
            job_state = JobState.COMPLETED if exit_code == 0 else JobState.FAILED
        else:
            job_state = JobState.NODE_FAIL  # gone from the scheduler with no exit status
        exp = self.store.experiment(exp_id)
        trial = self.store.trial(trial.id)
        ops = json.loads(trial.ops_json)
        end = RunEnd(
            exit_code, job_state, run.preempt_acked, trial.state == "CANCELED",
            stop_requested=trial.stop_requested, completed_ops=run.ops_decided > 0,
            closed=trial.closed,
            pending_ops=len(ops) > trial.ops_completed,
        )
        decision = decide_run_end(end, exp.state, trial.restarts, self._config(exp).max_restarts)
        self.journal.record(
            exp_id, "run_ended", trial_id=trial.id, run_id=run.run_id, exit_code=exit_code,
            job_state=job_state.value, outcome=decision.reason or decision.trial_state,
        )
        self.preempt_asked.pop((trial.id, run.run_id), None)
        self.controls.pop((trial.id, run.run_id), None)
        self.journal.record(
            exp_id, "trial_state", trial_id=trial.id, state=decision.trial_state,
            restarts=decision.restarts, reason=decision.reason,
        )
        if decision.trial_state in FINAL_TRIAL_STATES:
            self._collect_garbage(exp)
        self._report_exits()

    def _escalate_preemptions(self) -> None:
        """A trial that ignores a pause for preemption_timeout seconds is canceled."""
        for (trial_id, run_id), asked in list(self.preempt_asked.items()):
            trial = self.store.trial(trial_id)
            timeout = self._config(self.store.experiment(trial.experiment_id)).preemption_timeout
            run = self._run(trial_id, run_id)
            if run is None or run.state not in ("PENDING", "RUNNING"):
                self.preempt_asked.pop((trial_id, run_id), None)
            elif time.time() - asked > timeout and run.job_id:
                log.info("trial %d ignored preemption for %s s; canceling", trial_id, timeout)
                self._cancel([run.job_id])
                self.preempt_asked.pop((trial_id, run_id), None)

    def _submit_queued(self) -> None:
        for exp in self.store.experiments(unfinished=True):
            if exp.state != "ACTIVE":
                continue
            arrays = self._ensure_arrays(exp)
            for trial in self.store.trials(exp.id, state="QUEUED"):
                if arrays is not None and trial.run_id == 0:
                    found = owner(trial.request_id, arrays)
                    if found is not None:
                        self._submit(exp, trial, found)
                    continue  # its array is not submitted yet
                if not self._may_submit():
                    return
                self._submit(exp, trial)

    def _ensure_arrays(self, exp: Experiment) -> list[tuple[str, int, int]] | None:
        """The experiment's arrays as (job id, offset, count); None if it uses no arrays.

        Submits the next array when the search needs one and the site's limits allow it.
        """
        cfg = self._config(exp)
        bound, concurrency = self.search.bound(exp, cfg)
        if not self.scheduler.supports_arrays or bound <= 1:
            return None
        rows = self.store.arrays(exp.id)
        chunks = [(a.job_id, a.offset, a.count) for a in rows]
        covered = sum(a.count for a in rows)
        pending = bool(rows) and any(
            st.state == JobState.PENDING and job_id.startswith(f"{rows[-1].job_id}_")
            for job_id, st in self.statuses.items()
        )
        if rows and rows[-1].submitted > self.last_poll:
            pending = True  # not yet seen by a status query
        headroom = None
        if self.cluster.max_jobs:
            headroom = self.cluster.max_jobs - len(self.store.runs(live_only=True))
        chunk = next_chunk(bound, covered, pending, self.limits.get("MaxArraySize"), headroom)
        if chunk is None or not self._may_submit():
            return chunks
        array_dir = self.paths.experiment(exp.id) / "array"
        array_dir.mkdir(exist_ok=True)
        spec = ArraySpec(count=chunk.count, offset=chunk.offset,
                         throttle=min(concurrency, chunk.count) if concurrency else 0)
        script = array_dir / f"array{len(rows)}.sh"
        script.write_text(self.scheduler.render_script(
            array_request(exp.id, len(rows), array_dir, spec, cfg, self.cluster, self.backend)))
        self.submissions.append(time.time())
        try:
            job_id = self.scheduler.parse_job_id(
                self.runner.run(self.scheduler.submit_command(script)).stdout)
        except (SchedulerCommandError, ValueError) as e:
            self._refuse(exp, f"the scheduler refused the job array: {e}")
            return chunks
        self.journal.record(exp.id, "array_submitted", job_id=job_id, offset=chunk.offset,
                            count=chunk.count, throttle=spec.throttle)
        return [*chunks, (job_id, chunk.offset, chunk.count)]

    def _refuse(self, exp: Experiment, message: str) -> None:
        """The scheduler refused the search's array: the experiment stops with its reason."""
        log.warning("experiment %d: %s", exp.id, message)
        self.journal.record(exp.id, "experiment_error", message=message)

    def _may_submit(self) -> bool:
        now = time.time()
        while self.submissions and now - self.submissions[0] > 60:
            self.submissions.popleft()
        return len(self.submissions) < max(1, int(self.cluster.submissions_per_minute))

    def _submit(
        self, exp: Experiment, trial: Trial, array_task: tuple[str, int] | None = None
    ) -> None:
        """Submit the trial's next run: as a job, or into its array task's slot."""
        cfg = self._config(exp)
        run_id = trial.run_id + 1
        record = {
            "id": trial.id, "trial_seed": trial.trial_seed,
            "hparams": json.loads(trial.hparams_json),
            "latest_checkpoint": trial.latest_checkpoint or cfg.searcher.source_checkpoint_uuid,
            "steps_completed": trial.steps_completed,
        }
        spec = run_spec(cfg, self.paths, exp.id, record, run_id, self.backend, self.cluster)
        run_dir = Path(spec.run_dir)
        if run_dir.exists():
            shutil.rmtree(run_dir)  # left by a submission that never reached the scheduler
        run_dir.mkdir(parents=True)
        checkpoint_dir(cfg, self.paths).mkdir(parents=True, exist_ok=True)
        spec.save(run_dir)
        script = run_dir / "job.sh"
        script.write_text(self.scheduler.render_script(
            job_request(spec, cfg, self.cluster, self.backend)))
        self.journal.record(exp.id, "run_submitting", trial_id=trial.id, run_id=run_id,
                            first_op=trial.ops_completed)
        submitting = self._run(trial.id, run_id)
        if submitting is not None:
            self._sync_control(submitting)  # the trial reads it at start
        if array_task is not None:
            array_id, index = array_task
            slot = self.paths.experiment(exp.id) / "array" / f"slot-{trial.request_id}"
            tmp = slot.with_name(f".{slot.name}.tmp")
            tmp.write_text(str(run_dir))
            os.replace(tmp, slot)
            self.journal.record(exp.id, "run_submitted", trial_id=trial.id, run_id=run_id,
                                job_id=self.scheduler.array_task_id(array_id, index))
            return
        self.submissions.append(time.time())
        try:
            out = self.runner.run(self.scheduler.submit_command(script))
            job_id = self.scheduler.parse_job_id(out.stdout)
        except (SchedulerCommandError, ValueError) as e:
            self.journal.record(exp.id, "run_ended", trial_id=trial.id, run_id=run_id,
                                job_state="FAILED", outcome=f"submission refused: {e}")
            self.journal.record(exp.id, "trial_state", trial_id=trial.id, state="ERROR",
                                restarts=trial.restarts, reason=f"submission refused: {e}")
            return
        self.journal.record(exp.id, "run_submitted", trial_id=trial.id, run_id=run_id,
                            job_id=job_id)

    def _adopt_or_requeue(self, run: Run) -> None:
        """A run journaled as submitting but with no job id: the daemon died around sbatch."""
        trial = self.store.trial(run.trial_id)
        run_dir = self.paths.run(trial.experiment_id, trial.id, run.run_id)
        exit_info = read_json(run_dir / EXIT_FILE)
        if exit_info and exit_info.get("job_id"):
            job_id = str(exit_info["job_id"])
        else:
            job_id = self._find_job_by_name(
                f"hpcdet-e{trial.experiment_id}-t{trial.id}-r{run.run_id}")
        if job_id:
            self.journal.record(trial.experiment_id, "run_submitted", trial_id=trial.id,
                                run_id=run.run_id, job_id=job_id)
            return
        self.journal.record(trial.experiment_id, "run_ended", trial_id=trial.id,
                            run_id=run.run_id, job_state="CANCELED", outcome="never submitted")
        self.journal.record(trial.experiment_id, "trial_state", trial_id=trial.id,
                            state="QUEUED", restarts=trial.restarts)

    def _find_job_by_name(self, name: str) -> str:
        for job_id, status in self.statuses.items():
            if status.name == name:
                return job_id
        return ""

    def op_delete_checkpoint(self, uuid: str) -> str:
        with self.store.session() as s:
            ckpt = s.get(Checkpoint, uuid)
        if ckpt is None or ckpt.state != "COMPLETED":
            raise NotFoundError(f"checkpoint {uuid} not found (or already deleted); see "
                                "`hpcdet checkpoint list EXPERIMENT_ID`")
        self._delete_checkpoint(ckpt)
        return f"Deleted checkpoint {uuid}"

    def _delete_checkpoint(self, ckpt: Checkpoint) -> None:
        cfg = self._config(self.store.experiment(ckpt.experiment_id))
        self.journal.record(ckpt.experiment_id, "checkpoint_deleted", uuid=ckpt.uuid,
                            trial_id=ckpt.trial_id)
        shutil.rmtree(checkpoint_dir(cfg, self.paths) / ckpt.uuid, ignore_errors=True)

    def _collect_garbage(self, exp: Experiment) -> None:
        """Apply the GC policy to the checkpoints of the experiment's ended trials."""
        cfg = self._config(exp)
        ended = {t.id for t in self.store.trials(exp.id) if t.state in FINAL_TRIAL_STATES}
        ckpts = [c for c in self.store.checkpoints(exp_id=exp.id) if c.trial_id in ended]
        if not ckpts:
            return
        validations = [
            ValidationRecord(m.trial_id, m.steps_completed, json.loads(m.metrics_json))
            for trial_id in ended for m in self.store.metrics(trial_id, "validation")
        ]
        doomed = checkpoints_to_delete(
            [CheckpointRecord(c.uuid, c.trial_id, c.steps_completed, c.reported) for c in ckpts],
            validations, cfg.checkpoint_storage or RetentionPolicy(), cfg.searcher.metric,
            cfg.searcher.smaller_is_better,
        )
        for ckpt in ckpts:
            if ckpt.uuid in doomed:
                self._delete_checkpoint(ckpt)

    def _report_exits(self) -> None:
        """Tell each search about its trials that became final (once per trial)."""
        for exp in self.store.experiments(unfinished=True):
            if exp.searcher_done or exp.state not in ("ACTIVE", "PAUSED"):
                continue
            cfg = self._config(exp)
            for trial in self.store.trials(exp.id):
                if trial.state in FINAL_TRIAL_STATES and not trial.exit_reported:
                    self.search.feed(exp, cfg, TrialExited(trial.request_id, _exit_reason(trial)),
                                     {"exited_trial_id": trial.id})
                    exp = self.store.experiment(exp.id)

    def _finish_experiments(self) -> None:
        for exp in self.store.experiments(unfinished=True):
            if exp.state == "PAUSED":
                continue
            trials = self.store.trials(exp.id)
            if exp.error and exp.state == "ACTIVE":
                # The search failed (e.g. a validation without the searcher metric): stop.
                self.journal.record(exp.id, "experiment_state", state="STOPPING_ERROR")
                for trial in trials:
                    if trial.state == "ACTIVE":
                        self._stop_run(exp.id, trial, graceful=False)
                    elif trial.state not in FINAL_TRIAL_STATES:
                        self.journal.record(exp.id, "trial_state", trial_id=trial.id,
                                            state="CANCELED", reason=exp.error,
                                            restarts=trial.restarts)
                continue
            final = experiment_end_state([t.state for t in trials])
            if final is None:
                continue
            if exp.state == "STOPPING_ERROR":
                final = "ERROR"
            elif exp.state == "ACTIVE" and not exp.searcher_done:
                continue  # the searcher may still create trials
            self.journal.record(exp.id, "experiment_state", state=final)
            self._collect_garbage(exp)
            arrays = [a.job_id for a in self.store.arrays(exp.id)]
            if arrays:
                self._cancel(arrays)  # tasks for trials the search never created


    # ---------------------------------------------------------------- status for the CLI

    def write_status(self) -> None:
        live = self.store.runs(live_only=True)
        status = {
            "pid": os.getpid(), "host": hostname(), "started": self.started,
            "last_tick": self.last_tick, "last_poll": self.last_poll, "polls": self.polls,
            "scheduler_calls": dict(self.runner.calls), "backend": self.backend,
            "live_jobs": [r.job_id for r in live if r.job_id],
            "database": str(self.store.path), "state_dir": str(self.paths.root),
            "stopping": self.stopping,
        }
        write_atomic(self.paths.local_dir() / "status.json", status)
        if time.time() - self.last_heartbeat > HEARTBEAT_SECONDS or self.stopping:
            self.last_heartbeat = time.time()
            record = {k: status[k] for k in ("pid", "host", "started", "database", "backend")}
            record["heartbeat"] = self.last_heartbeat
            record["local_dir"] = str(self.paths.local_dir())
            record["running"] = not self.stopping
            write_atomic(self.paths.daemon_record, record)


def _exit_reason(trial: Trial) -> str:
    if trial.state == "ERROR":
        return EXIT_ERRORED
    if trial.state == "CANCELED":
        return EXIT_CANCELED
    return {"INVALID_HP": EXIT_INVALID_HP, "USER_REQUESTED_STOP": EXIT_USER_STOP}.get(
        trial.early_exit, EXIT_COMPLETED)
