"""An experiment's end: the final state once its search is over and its trials have ended."""

from __future__ import annotations

from hpcdet.daemon.jobs import Jobs
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.retention import Retention
from hpcdet.paths import StatePaths
from hpcdet.records import ExperimentRecord as Experiment
from hpcdet.rundir import layout
from hpcdet.rundir.atomic import write_text_atomic
from hpcdet.states import ExperimentState, TrialState, experiment_final_state
from hpcdet.store.entries import ExperimentStateChanged
from hpcdet.store.repository import Store


class Finisher:
    def __init__(self, store: Store, journal: Journal, jobs: Jobs, retention: Retention,
                 paths: StatePaths) -> None:
        self.store = store
        self.journal = journal
        self.jobs = jobs
        self.retention = retention
        self.paths = paths

    def close_arrays(self, exp_id: int, cancel: bool = False) -> None:
        """No task of the experiment's arrays will be given a trial any more: a task that
        starts or waits without one exits at once; ``cancel`` also drops every task (running
        ones too) from the scheduler. Idempotent."""
        arrays = [a.job_id for a in self.store.arrays(exp_id)]
        array_dir = layout.array_dir(self.paths.experiment(exp_id))
        if not arrays and not any(array_dir.glob("pilot-*")):  # pilots read it too
            return
        closed = layout.array_closed(self.paths.experiment(exp_id))
        if not closed.exists():
            write_text_atomic(closed, "")
        if cancel:
            self.jobs.cancel(arrays)

    def finish(self, exp: Experiment) -> None:
        """Journal the experiment's final state if it has one now; a search that failed
        (e.g. a validation without the searcher metric) stops the experiment first."""
        if exp.error and exp.state == ExperimentState.ACTIVE:
            self.journal.record(exp.id, ExperimentStateChanged(
                state=ExperimentState.STOPPING_ERROR, cascade=True, reason=exp.error))
            self.close_arrays(exp.id)
            runs = self.store.current_runs(self.store.trials(exp.id, state=TrialState.ACTIVE))
            self.jobs.cancel([run.job_id for run in runs if run.job_id])
            return
        if self.store.any_unfinished_trial(exp.id):
            return  # it goes on (experiment_final_state); asked first: one row, not them all
        final = experiment_final_state(exp.state, exp.searcher_done,
                                       self.store.trial_states(exp.id))
        if final is None:
            return
        # Before the final state: afterwards the experiment is never looked at again. Both are
        # idempotent, and done again by the next daemon if this one dies in between.
        self.retention.collect(exp)
        self.close_arrays(exp.id, cancel=True)  # tasks for trials the search never created
        self.journal.record(exp.id, ExperimentStateChanged(state=final))
