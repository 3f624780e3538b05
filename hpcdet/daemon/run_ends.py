"""Noticing that a run has ended (its exit file, the scheduler's final state, or the job gone
from the scheduler) and deciding, once, what its trial does next."""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hpcdet import short_jobs
from hpcdet.config import ExperimentConfig
from hpcdet.daemon.configs import Configs
from hpcdet.daemon.controls import Controls
from hpcdet.daemon.ingestion import Ingestion
from hpcdet.daemon.jobs import Jobs
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.retention import Retention
from hpcdet.paths import StatePaths
from hpcdet.records import ExperimentRecord, LiveRun
from hpcdet.rundir import layout
from hpcdet.rundir.atomic import read_json
from hpcdet.states import FINAL_TRIAL_STATES, JobState, RunEnd, RunState, TrialState, decide_run_end
from hpcdet.store.entries import ExperimentAdvised
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)

# How long a signalled run's end waits for the scheduler's final state before it is decided
# from the exit code alone (the scheduler stopped answering, or lists no end).
SCHEDULER_WORD_GRACE = 120.0
# The advice on short trials is looked for at the first ended runs of an experiment only: each
# look reads all its runs.
ADVICE_LOOKS = 10


class RunEnds:
    def __init__(self, store: Store, journal: Journal, paths: StatePaths, configs: Configs,
                 jobs: Jobs, ingestion: Ingestion, controls: Controls,
                 retention: Retention, site_minutes: int | None = None) -> None:
        """``site_minutes``: the cluster config's ``min_job_minutes``."""
        self.store = store
        self.journal = journal
        self.paths = paths
        self.configs = configs
        self.jobs = jobs
        self.ingestion = ingestion
        self.controls = controls
        self.retention = retention
        self.site_minutes = site_minutes
        self.advice_looks: Counter[int] = Counter()

    def check(self, run: LiveRun) -> None:
        exp_id = run.experiment_id
        run_dir = self.paths.run(exp_id, run.trial_id, run.run_id)
        exit_info = read_exit(layout.run_files(run_dir).exit)
        if exit_info is None and not self.jobs.ended(run.job_id):
            return
        if run.state == RunState.SUBMITTING:
            return
        if exit_info is not None and awaits_scheduler(exit_info, self.jobs.ended(run.job_id)):
            return
        self.ingestion.ingest(run)  # what it reported before it ended comes first
        current = self.store.run(run.trial_id, run.run_id)  # as that ingest left it
        if current is None:
            return
        exit_code = exit_info.get("exit_code") if exit_info else None
        status = self.jobs.statuses.get(run.job_id)
        if status and status.state.is_final:
            job_state = status.state
        elif exit_info is not None:
            job_state = JobState.COMPLETED if exit_code == 0 else JobState.FAILED
        else:
            job_state = JobState.NODE_FAIL  # gone from the scheduler with no exit status
        exp = self.store.experiment(exp_id)
        trial = self.store.trial(run.trial_id)
        ops = list(trial.ops)
        end = RunEnd(
            exit_code, job_state, current.preempt_acked, trial.state == TrialState.CANCELED,
            stop_requested=trial.stop_requested, completed_ops=current.ops_decided > 0,
            closed=trial.closed,
            pending_ops=len(ops) > trial.ops_completed,
            reported=any(r.event_seq > 0 for r in self.store.runs([trial.id])),
            hook_failed=layout.hook_failure(run_dir),
            launch_failed=layout.launch_failure(run_dir),
        )
        cfg = self.configs.get(exp)
        decision = decide_run_end(end, exp.state, trial.restarts, cfg.max_restarts)
        accounted = self.jobs.usage(run.job_id)
        self.journal.run_ended(exp_id, current, decision, job_state=job_state,
                               outcome=decision.reason or decision.trial_state,
                               exit_code=exit_code, started=first_node_started(run_dir),
                               used=accounted[0] if accounted else None,
                               usage_by=accounted[1] if accounted else "")
        key = (trial.id, run.run_id)
        self.controls.forget(key)
        self.ingestion.forget(key)
        if decision.trial_state in FINAL_TRIAL_STATES:
            self.retention.collect(exp)
        self._advise(exp, cfg)
        self.ingestion.report_exits()

    def _advise(self, exp: ExperimentRecord, cfg: ExperimentConfig) -> None:
        """Advise packing once a search's first runs show its trials are short jobs."""
        if exp.advice or self.advice_looks[exp.id] >= ADVICE_LOOKS:
            return
        self.advice_looks[exp.id] += 1
        runs = self.store.runs([t.id for t in self.store.trials(exp.id)])
        seconds = [r.ended - r.started for r in runs
                   if r.ended is not None and r.started is not None]
        advice = short_jobs.from_runs(seconds, cfg, self.site_minutes)
        if advice:
            self.journal.record(exp.id, ExperimentAdvised(advice=advice))
            log.info("experiment %d: %s", exp.id, advice)


def awaits_scheduler(exit_info: dict[str, Any], job_ended: bool,
                     now: float | None = None) -> bool:
    """Whether a run's end waits for the scheduler's word: its harness was killed by a signal
    (exit 128 + N) and the scheduler has not yet said why. A walltime kill is such a signal
    (PBS's arrives up to 120 s late, while its job still shows R), and only the scheduler tells
    it from the user's own failure; it says so within a poll or two of the job's end."""
    code, ended = exit_info.get("exit_code"), exit_info.get("ended")
    if job_ended or not isinstance(code, int) or not 128 < code < 256:
        return False
    if not isinstance(ended, (int, float)):
        return False  # an exit file without its time (older harnesses): as before
    return (time.time() if now is None else now) < ended + SCHEDULER_WORD_GRACE


def first_node_started(run_dir: Path) -> float | None:
    """When the run's first harness started: the oldest file in its ``nodes/`` (each node's
    address and info are written as it enters the rendezvous; its exit files come later).
    None for a run that never started."""
    try:
        times = [entry.stat().st_mtime for entry in os.scandir(run_dir / layout.NODES_DIR)]
    except OSError:
        return None
    return min(times, default=None)


def read_exit(path: str) -> dict[str, Any] | None:
    """The run's exit file, None before the batch script writes it. Most runs on most ticks
    have none: asked by access(2), without a Path or an exception (an I/O error there reads
    as "not yet", and the next tick asks again); reading one that exists may raise, to the
    loop, which retries."""
    if not os.access(path, os.F_OK):
        return None
    found = read_json(Path(path))
    return found if isinstance(found, dict) else None
