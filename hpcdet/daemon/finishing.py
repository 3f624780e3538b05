"""An experiment's end: the final state once its search is over and its trials have ended."""

from __future__ import annotations

from hpcdet.daemon.jobs import Jobs
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.retention import Retention
from hpcdet.states import ExperimentState, TrialState, experiment_final_state
from hpcdet.store.models import Experiment
from hpcdet.store.repository import Store


class Finisher:
    def __init__(self, store: Store, journal: Journal, jobs: Jobs, retention: Retention) -> None:
        self.store = store
        self.journal = journal
        self.jobs = jobs
        self.retention = retention

    def finish(self, exp: Experiment) -> None:
        """Journal the experiment's final state if it has one now; a search that failed
        (e.g. a validation without the searcher metric) stops the experiment first."""
        if exp.error and exp.state == ExperimentState.ACTIVE:
            self.journal.record(exp.id, "experiment_state", state=ExperimentState.STOPPING_ERROR,
                                cascade=True, reason=exp.error)
            for trial in self.store.trials(exp.id, state=TrialState.ACTIVE):
                run = self.store.run(trial.id, trial.run_id)
                if run is not None and run.job_id:
                    self.jobs.cancel([run.job_id])
            return
        trials = self.store.trials(exp.id)
        final = experiment_final_state(exp.state, exp.searcher_done, [t.state for t in trials])
        if final is None:
            return
        # Before the final state: afterwards the experiment is never looked at again. Both are
        # idempotent, and done again by the next daemon if this one dies in between.
        self.retention.collect(exp)
        arrays = [a.job_id for a in self.store.arrays(exp.id)]
        if arrays:
            self.jobs.cancel(arrays)  # tasks for trials the search never created
        self.journal.record(exp.id, "experiment_state", state=final)
