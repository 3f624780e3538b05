"""What each live run should do now, said through its control file: carry on, or checkpoint
and exit (the searcher stopped it, the experiment paused or stopped, it runs outside its
resource pool); and the escalation when a run ignores that for ``preemption_timeout``."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hpcdet.daemon.configs import Configs
from hpcdet.daemon.guard import Guard
from hpcdet.daemon.jobs import Jobs
from hpcdet.daemon.site import Site
from hpcdet.paths import StatePaths
from hpcdet.records import ExperimentRecord as Experiment
from hpcdet.records import LiveRun
from hpcdet.records import RunRecord as Run
from hpcdet.records import TrialRecord as Trial
from hpcdet.rundir import layout
from hpcdet.rundir.control import Control, write_control
from hpcdet.states import STOPPING_STATES, SUBMITTED_RUN_STATES, ExperimentState, JobState
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)


class Controls:
    def __init__(self, store: Store, paths: StatePaths, configs: Configs, jobs: Jobs,
                 site: Site, guard: Guard) -> None:
        self.store = store
        self.paths = paths
        self.configs = configs
        self.jobs = jobs
        self.site = site
        self.guard = guard
        # (trial, run) -> what its control file was last written from
        self.written: dict[tuple[int, int], tuple[Any, ...]] = {}
        self.preempt_asked: dict[tuple[int, int], float] = {}
        self.started: set[tuple[int, int]] = set()  # (trial, run) of runs seen started

    def sync_all(self, live: list[LiveRun] | None = None) -> None:
        """Make every live run's control file say what the run should do now. ``live``: the
        live runs, if the caller has just read them and nothing has been decided since."""
        # Read together, not a query or two per run: the loop does this every tick.
        exps = {e.id: e for e in self.store.experiments(unfinished=True)}
        best: dict[int, float | None] = {}
        for run in self.store.live_runs() if live is None else live:
            with self.guard(run.experiment_id, "writing a control file",
                            (run.trial_id, run.run_id)):
                self.sync(run, best, exps.get(run.experiment_id))

    def sync(self, run: LiveRun, best: dict[int, float | None] | None = None,
             exp: Experiment | None = None) -> None:
        """``best``: the experiments' best validations so far, filled in as needed; ``exp``:
        the run's, if the caller has just read it."""
        best = {} if best is None else best
        exp = exp or self.store.experiment(run.experiment_id)
        # Whether the run started is asked only where it matters: a stat per live run per
        # tick is most of this pass when nothing stops.
        preempt, reason = False, ""
        if run.stop_requested:
            preempt, reason = True, "stopped early by the searcher"
            if run.job_id and not self._started(exp.id, run):
                self.jobs.cancel([run.job_id])  # it has not started: it need not run at all
        elif exp.state == ExperimentState.PAUSED and self._started(exp.id, run):
            preempt, reason = True, "the experiment was paused"
        elif exp.state in STOPPING_STATES:
            preempt, reason = True, (
                "the experiment was canceled" if exp.state == ExperimentState.STOPPING_CANCELED
                else f"the experiment failed: {exp.error}")
            if run.job_id and not self._started(exp.id, run):
                self.jobs.cancel([run.job_id])  # again after a restart: the first ask may be lost
        elif self._outside_pool(run, exp) and self._started(exp.id, run):
            preempt, reason = True, f"moving to resource pool {exp.resource_pool!r}"
        if exp.id not in best:
            best[exp.id] = self._best(exp)
        key = (run.trial_id, run.run_id)
        said = (preempt, reason, best[exp.id], run.ops, run.first_op, run.ops_decided)
        if self.written.get(key) != said:
            ops = run.ops
            control = Control(preempt, reason, best[exp.id],
                              tuple(ops[run.first_op:]) if ops else None,
                              run.ops_decided if ops else 0)
            write_control(Path(layout.run_files(self.paths.run(exp.id, *key)).control), control)
            self.written[key] = said
        if preempt:
            self.preempt_asked.setdefault(key, time.time())
        else:
            self.preempt_asked.pop(key, None)

    def stop(self, exp_id: int, trials: Iterable[Trial], graceful: bool) -> None:
        """Stop the trials' runs: a job that has not started cannot checkpoint, so it is
        canceled (one command for all); one that has is asked through its control file
        (``sync``) unless the stop is not graceful."""
        self.jobs.cancel([run.job_id for run in self.store.current_runs(trials)
                          if run.job_id and not (graceful and self._started(exp_id, run))])

    def escalate(self) -> None:
        """A trial that ignores a preemption for preemption_timeout seconds is canceled."""
        for (trial_id, run_id), asked in list(self.preempt_asked.items()):
            trial = self.store.trial(trial_id)
            with self.guard(trial.experiment_id, "escalating a preemption", (trial_id, run_id)):
                self._escalate(trial, run_id, asked)

    def forget(self, key: tuple[int, int]) -> None:
        """The run (trial, run) has ended."""
        self.preempt_asked.pop(key, None)
        self.written.pop(key, None)
        self.started.discard(key)

    def _escalate(self, trial: Trial, run_id: int, asked: float) -> None:
        timeout = self.configs.get(self.store.experiment(trial.experiment_id)).preemption_timeout
        run = self.store.run(trial.id, run_id)
        if run is None or run.state not in SUBMITTED_RUN_STATES:
            self.preempt_asked.pop((trial.id, run_id), None)
        elif time.time() - asked > timeout and run.job_id:
            log.info("trial %d ignored preemption for %s s; canceling", trial.id, timeout)
            self.jobs.cancel([run.job_id])
            self.preempt_asked.pop((trial.id, run_id), None)

    def _started(self, exp_id: int, run: Run | LiveRun) -> bool:
        key = (run.trial_id, run.run_id)
        if key in self.started:
            return True
        if os.path.isdir(layout.run_files(self.paths.run(exp_id, *key)).nodes):
            self.started.add(key)  # a run that has started stays so
            return True
        return False

    def _outside_pool(self, run: LiveRun, exp: Experiment) -> bool:
        """Runs on a partition other than the experiment's, after `job update --resource-pool`."""
        status = self.jobs.statuses.get(run.job_id)
        if status is None or not status.partition or status.state != JobState.RUNNING:
            return False
        partition = self.site.partition_name(self.configs.get(exp))
        # A job may name several partitions ("a,b"); it runs in one of them.
        return bool(partition) and status.partition not in partition.split(",")

    def _best(self, exp: Experiment) -> float | None:
        return self.store.best_validation(exp.id, self.configs.get(exp).searcher.smaller_is_better)
