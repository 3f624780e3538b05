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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcdet.config import ExperimentConfig
from hpcdet.daemon import requests as req
from hpcdet.daemon.commands import Commands
from hpcdet.daemon.queueing import Queueing
from hpcdet.daemon.searching import searcher_source
from hpcdet.daemon.submission import Submission
from hpcdet.daemon.submit import checkpoint_dir
from hpcdet.errors import SchedulerCommandError
from hpcdet.exchange import Event, read_events, read_json, write_atomic
from hpcdet.gc import CheckpointRecord, RetentionPolicy, ValidationRecord, checkpoints_to_delete
from hpcdet.paths import hostname
from hpcdet.runspec import CONTROL_FILE, EVENTS_FILE, EXIT_FILE
from hpcdet.search.base import (
    EXIT_CANCELED,
    EXIT_COMPLETED,
    EXIT_ERRORED,
    EXIT_INVALID_HP,
    EXIT_USER_STOP,
    OpCompleted,
    TrialExited,
    ValidationReported,
)
from hpcdet.search.base import Event as SearchEvent
from hpcdet.states import (
    FINAL_TRIAL_STATES,
    LIVE_RUN_STATES,
    RUNNING_EXPERIMENT_STATES,
    STOPPING_STATES,
    SUBMITTED_RUN_STATES,
    ExperimentState,
    JobState,
    RunEnd,
    RunState,
    TrialState,
    decide_run_end,
    experiment_final_state,
)
from hpcdet.store.models import Checkpoint, Experiment, Run, Trial

log = logging.getLogger(__name__)

LOOP_SECONDS = 0.25
HEARTBEAT_SECONDS = 30.0
MISSING_POLLS_BEFORE_VANISHED = 2


class Daemon(Commands, Submission, Queueing):
    """The loop: requests, events, the scheduler's word, decisions (module docstring)."""

    # ---------------------------------------------------------------- lifecycle of the loop

    def serve(self) -> None:
        started = False
        failures = 0
        while not self.stopping:
            try:
                if not started:
                    self.reconcile()
                    started = True
                else:
                    self.tick()
                failures = 0
            except Exception as e:
                if not started and not isinstance(e, OSError):
                    raise  # a daemon that cannot start says so; a passing I/O error is retried
                # Keep serving: the state is in the run tree and the database; a bug in one
                # tick must not orphan running jobs. Back off while it repeats.
                failures += 1
                log.exception("%s failed (%d in a row)", "tick" if started else "start", failures)
                time.sleep(min(30.0, LOOP_SECONDS * 2**failures))
            time.sleep(LOOP_SECONDS)
        self.write_status()

    def reconcile(self) -> None:
        """Catch up with the run tree and the scheduler after a start or a crash."""
        self.rounds += 1
        self._read_site()
        applied = 0
        for exp_id in self.journal.experiment_ids():
            with self._guard(exp_id, "replaying its journal"):
                applied += self.journal.replay(exp_id)
        log.info("journal replay applied %d entries", applied)
        for exp in self.store.experiments(unfinished=True):
            if exp.state in RUNNING_EXPERIMENT_STATES:  # a stopping one's search has ended
                with self._guard(exp.id, "restarting the search"):
                    self.search.start(exp, self._config(exp))
        # A rebuilt database has every event log still to read.
        self._for_runs("ingest", self._ingest, self.store.runs())
        self._report_exits()
        self._poll()

    def tick(self) -> None:
        self.rounds += 1
        now = time.time()
        req.serve_pending(self.paths, self.handle)
        live = self.store.runs(live_only=True)
        self._for_runs("ingest", self._ingest, live)
        # Poll while jobs live, and while a search waits for its next array to be due.
        busy = live or any(e.state == ExperimentState.ACTIVE
                           for e in self.store.experiments(unfinished=True))
        if busy and now - self.last_poll >= self.poll_interval:
            self._poll()
        self._for_runs("ending a run", self._check_end, self.store.runs(live_only=True))
        self._report_exits()
        self._sync_controls()
        self._escalate_preemptions()
        self._submit_queued()
        self._finish_experiments()
        self.last_tick = time.time()
        self.write_status()

    # ---------------------------------------------------------------- runs

    def _for_runs(self, step: str, fn: Callable[[Run], None], runs: list[Run]) -> None:
        """``fn`` for each run, guarded per experiment (see ``_guard``)."""
        for run in runs:
            with self._guard(self._exp_id(run), step):
                fn(run)

    def _ingest(self, run: Run) -> None:
        trial = self.store.trial(run.trial_id)
        exp = self.store.experiment(trial.experiment_id)
        cfg = self._config(exp)
        path = self.paths.run(exp.id, trial.id, run.run_id) / EVENTS_FILE
        new = self.ingestor.ingest((trial.id, run.run_id), path, cfg.searcher)
        self._feed_trial_events(exp, cfg, trial, run.run_id, path, new)

    def _feed_trial_events(
        self, exp: Experiment, cfg: ExperimentConfig, trial: Trial, run_id: int, path: Path,
        new: list[Event],
    ) -> None:
        """Feed the searcher what it decides on: validations (0.38) and completed ops (0.37).

        What is fed follows what is stored (``Run.event_seq``) against what the searcher has
        considered, not what one ingest returned: after a start, events a killed daemon stored
        but never fed are read again from the log.
        """
        if exp.searcher_done or exp.state not in RUNNING_EXPERIMENT_STATES:
            return
        run = self._run(trial.id, run_id)
        if run is None:
            return
        key = (trial.id, run_id)
        seen = self.considered.get(key, run.searcher_seq)
        if seen >= run.event_seq:
            return
        if run.state in LIVE_RUN_STATES and (not new or new[0].seq > seen + 1):
            new = read_events(path, 0)
        wants_validations = bool(cfg.searcher.time_metric)
        for ev in new:
            if not seen < ev.seq <= run.event_seq:
                continue
            source = searcher_source(trial.id, run_id, ev.seq)
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
        self.considered[key] = run.event_seq

    def _sync_controls(self) -> None:
        """Make every live run's control file say what the run should do now."""
        best: dict[int, float | None] = {}
        self._for_runs("writing a control file", lambda run: self._sync_control(run, best),
                       self.store.runs(live_only=True))

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
        elif exp.state == ExperimentState.PAUSED and started:
            preempt, reason = True, "the experiment was paused"
        elif exp.state in STOPPING_STATES:
            preempt, reason = True, (
                "the experiment was canceled" if exp.state == ExperimentState.STOPPING_CANCELED
                else f"the experiment failed: {exp.error}")
            if not started and run.job_id:
                self._cancel([run.job_id])  # again after a restart: the first ask may be lost
        elif started and self._outside_pool(run, exp):
            preempt, reason = True, f"moving to resource pool {exp.resource_pool!r}"
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

    def _outside_pool(self, run: Run, exp: Experiment) -> bool:
        """Runs on a partition other than the experiment's, after `job update --resource-pool`."""
        status = self.statuses.get(run.job_id)
        if status is None or not status.partition or status.state != JobState.RUNNING:
            return False
        partition = self._partition_name(self._config(exp))
        # A job may name several partitions ("a,b"); it runs in one of them.
        return bool(partition) and status.partition not in partition.split(",")

    def _best(self, exp: Experiment) -> float | None:
        values = [t.best_validation for t in self.store.trials(exp.id)
                  if t.best_validation is not None]
        if not values:
            return None
        return min(values) if self._config(exp).searcher.smaller_is_better else max(values)

    def _poll(self) -> None:
        if self.poll_scheduler() and not self.settled:
            # The first answer since start: what the last daemon left half-submitted.
            self._settle_submissions()
            self.settled = True

    def poll_scheduler(self) -> bool:
        """One status query for all of the user's jobs; False if the scheduler did not answer."""
        self.last_poll = time.time()
        live = [r.job_id for r in self.store.runs(live_only=True) if r.job_id]
        try:
            result = self.runner.run(self.scheduler.status_command(live))
        except SchedulerCommandError as e:
            # Back off: the next poll waits twice as long, up to five minutes.
            self.last_poll += min(300.0, self.poll_interval)
            log.warning("scheduler status query failed: %s", e)
            return False
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
            # A state the backend cannot name says nothing: the run keeps its last one and
            # stays live (stored as UNKNOWN, it would drop out of the live runs for good).
            if status is not None and status.state in (JobState.PENDING, JobState.RUNNING):
                self._set_run_state(run, status.state.value, status.reason)
        self._order_queue()
        return True

    def _set_run_state(self, run: Run, state: str, reason: str) -> None:
        if (run.state, run.reason) == (state, reason):
            return
        with self.store.session() as s:
            row = s.get(Run, run.id)
            if row is not None and row.state in SUBMITTED_RUN_STATES:
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
        if run.state == RunState.SUBMITTING:
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
            exit_code, job_state, run.preempt_acked, trial.state == TrialState.CANCELED,
            stop_requested=trial.stop_requested, completed_ops=run.ops_decided > 0,
            closed=trial.closed,
            pending_ops=len(ops) > trial.ops_completed,
            reported=any(r.event_seq > 0 for r in self.store.runs([trial.id])),
        )
        decision = decide_run_end(end, exp.state, trial.restarts, self._config(exp).max_restarts)
        self._record_run_end(exp_id, run, decision, job_state=job_state,
                             outcome=decision.reason or decision.trial_state, exit_code=exit_code)
        for memo in (self.preempt_asked, self.controls, self.considered):
            memo.pop((trial.id, run.run_id), None)
        if decision.trial_state in FINAL_TRIAL_STATES:
            self._collect_garbage(exp)
        self._report_exits()

    def _escalate_preemptions(self) -> None:
        """A trial that ignores a pause for preemption_timeout seconds is canceled."""
        for (trial_id, run_id), asked in list(self.preempt_asked.items()):
            trial = self.store.trial(trial_id)
            with self._guard(trial.experiment_id, "escalating a preemption"):
                self._escalate_preemption(trial, run_id, asked)

    def _escalate_preemption(self, trial: Trial, run_id: int, asked: float) -> None:
        timeout = self._config(self.store.experiment(trial.experiment_id)).preemption_timeout
        run = self._run(trial.id, run_id)
        if run is None or run.state not in SUBMITTED_RUN_STATES:
            self.preempt_asked.pop((trial.id, run_id), None)
        elif time.time() - asked > timeout and run.job_id:
            log.info("trial %d ignored preemption for %s s; canceling", trial.id, timeout)
            self._cancel([run.job_id])
            self.preempt_asked.pop((trial.id, run_id), None)

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
            if exp.searcher_done or exp.state not in RUNNING_EXPERIMENT_STATES:
                continue
            with self._guard(exp.id, "reporting trial exits to the searcher"):
                self._report_exits_of(exp)

    def _report_exits_of(self, exp: Experiment) -> None:
        cfg = self._config(exp)
        for trial in self.store.trials(exp.id):
            if trial.state in FINAL_TRIAL_STATES and not trial.exit_reported:
                self.search.feed(exp, cfg, TrialExited(trial.request_id, _exit_reason(trial)),
                                 {"exited_trial_id": trial.id})
                exp = self.store.experiment(exp.id)

    def _finish_experiments(self) -> None:
        for exp in self.store.experiments(unfinished=True):
            with self._guard(exp.id, "finishing"):
                self._finish(exp)

    def _finish(self, exp: Experiment) -> None:
        if exp.error and exp.state == ExperimentState.ACTIVE:
            # The search failed (e.g. a validation without the searcher metric): stop.
            self.journal.record(exp.id, "experiment_state", state=ExperimentState.STOPPING_ERROR,
                                cascade=True, reason=exp.error)
            for trial in self.store.trials(exp.id, state=TrialState.ACTIVE):
                self._stop_run(exp.id, trial, graceful=False)
            return
        trials = self.store.trials(exp.id)
        final = experiment_final_state(exp.state, exp.searcher_done, [t.state for t in trials])
        if final is None:
            return
        # Before the final state: afterwards the experiment is never looked at again. Both are
        # idempotent, and done again by the next daemon if this one dies in between.
        self._collect_garbage(exp)
        arrays = [a.job_id for a in self.store.arrays(exp.id)]
        if arrays:
            self._cancel(arrays)  # tasks for trials the search never created
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


def _exit_reason(trial: Trial) -> str:
    if trial.state == TrialState.ERROR:
        return EXIT_ERRORED
    if trial.state == TrialState.CANCELED:
        return EXIT_CANCELED
    return {"INVALID_HP": EXIT_INVALID_HP, "USER_REQUESTED_STOP": EXIT_USER_STOP}.get(
        trial.early_exit, EXIT_COMPLETED)
