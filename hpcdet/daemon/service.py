"""The per-user daemon: the only writer of the database and the only caller of the scheduler.

One loop, every ``LOOP_SECONDS``: answer requests, ingest trial events, notice ended runs,
submit queued trials (rate-limited), and every poll interval ask the scheduler once about all
of the user's jobs.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import time
from collections import deque
from pathlib import Path
from typing import Any

from hpcdet.config import ExperimentConfig
from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon import requests as req
from hpcdet.daemon.ingest import Ingestor
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.submit import checkpoint_dir, job_request, run_spec
from hpcdet.errors import HpcdetError, SchedulerCommandError, StateError
from hpcdet.exchange import read_json, write_atomic
from hpcdet.lifecycle import FINAL_TRIAL_STATES, RunEnd, decide_run_end, experiment_end_state
from hpcdet.paths import StatePaths, hostname
from hpcdet.runspec import CONTROL_FILE, EVENTS_FILE, EXIT_FILE
from hpcdet.schedulers import JobState, JobStatus, Scheduler, make_scheduler
from hpcdet.schedulers.runner import CommandRunner
from hpcdet.schedulers.slurm import parse_config_limits
from hpcdet.search.hparams import sample
from hpcdet.store.models import Experiment, Run, Trial
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
        self.statuses: dict[str, JobStatus] = {}
        self.missing: dict[str, int] = {}
        self.preempt_asked: dict[tuple[int, int], float] = {}
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
        for run in self.store.runs():  # a rebuilt database has every event log still to read
            self._ingest(run)
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
        storage = parse_config_limits(out).get("AccountingStorageType", "")
        self.scheduler.settings["accounting"] = bool(storage) and not storage.endswith("/none")

    def tick(self) -> None:
        now = time.time()
        req.serve_pending(self.paths, self.handle)
        live = self.store.runs(live_only=True)
        for run in live:
            self._ingest(run)
        if live and now - self.last_poll >= self.poll_interval:
            self.poll_scheduler()
        for run in self.store.runs(live_only=True):
            self._check_end(run)
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
        max_exp, max_trial = self.journal.max_ids()
        exp_id = max_exp + 1
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
        rng = random.Random(cfg.experiment_seed)
        trial_id = max_trial + 1
        self.journal.record(
            exp_id, "trial_created", trial_id=trial_id, hparams=sample(cfg.hyperparameters, rng),
            trial_seed=rng.randrange(2**31),
        )
        self._submit_queued()
        trial = self.store.trial(trial_id)
        return {"experiment_id": exp_id, "trial_ids": [trial_id], "warning": trial.end_reason}

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
            elif trial.state == "ACTIVE":
                run_dir = self.paths.run(exp_id, trial.id, trial.run_id)
                write_atomic(run_dir / CONTROL_FILE, {"preempt": False, "reason": ""})
                self.preempt_asked.pop((trial.id, trial.run_id), None)
        self._submit_queued()
        return f"Activated experiment {exp_id}"

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
        run_dir = self.paths.run(exp_id, trial.id, run.run_id)
        started = (run_dir / "nodes").exists()
        if graceful and started:
            write_atomic(run_dir / CONTROL_FILE, {"preempt": True, "reason": "pause",
                                                    "time": time.time()})
            self.preempt_asked[(trial.id, run.run_id)] = time.time()
        elif run.job_id:
            self._cancel([run.job_id])

    def _cancel(self, job_ids: list[str]) -> None:
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

    def _ingest(self, run: Run) -> None:
        trial = self.store.trial(run.trial_id)
        exp = self.store.experiment(trial.experiment_id)
        searcher = self._config(exp).searcher
        events = self.paths.run(exp.id, trial.id, run.run_id) / EVENTS_FILE
        self.ingestor.ingest((trial.id, run.run_id), events, searcher)

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
        end = RunEnd(exit_code, job_state, run.preempt_acked, trial.state == "CANCELED")
        decision = decide_run_end(end, exp.state, trial.restarts, self._config(exp).max_restarts)
        self.journal.record(
            exp_id, "run_ended", trial_id=trial.id, run_id=run.run_id, exit_code=exit_code,
            job_state=job_state.value, outcome=decision.reason or decision.trial_state,
        )
        self.preempt_asked.pop((trial.id, run.run_id), None)
        self.journal.record(
            exp_id, "trial_state", trial_id=trial.id, state=decision.trial_state,
            restarts=decision.restarts, reason=decision.reason,
        )

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
            for trial in self.store.trials(exp.id, state="QUEUED"):
                if not self._may_submit():
                    return
                self._submit(exp, trial)

    def _may_submit(self) -> bool:
        now = time.time()
        while self.submissions and now - self.submissions[0] > 60:
            self.submissions.popleft()
        return len(self.submissions) < max(1, int(self.cluster.submissions_per_minute))

    def _submit(self, exp: Experiment, trial: Trial) -> None:
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
        self.journal.record(exp.id, "run_submitting", trial_id=trial.id, run_id=run_id)
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

    def _finish_experiments(self) -> None:
        for exp in self.store.experiments(unfinished=True):
            if exp.state == "PAUSED":
                continue
            states = [t.state for t in self.store.trials(exp.id)]
            final = experiment_end_state(states)
            if final is not None:
                self.journal.record(exp.id, "experiment_state", state=final)

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
