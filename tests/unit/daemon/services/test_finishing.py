"""Finisher: the final state once the search is over and the trials have ended."""

from __future__ import annotations

from pathlib import Path

from hpcdet.records import ExperimentRecord as Experiment
from hpcdet.store.entries import ArraySubmitted, ExperimentErrorSet, RunEnded, SearcherShutdown
from tests.unit.daemon.services.support import World, two_experiments


def _exp(w: World) -> Experiment:
    return w.store.experiment(1)


def test_an_experiment_ends_once_its_search_is_done_and_its_trials_ended(tmp_path: Path) -> None:
    w = two_experiments(tmp_path)
    w.journal.record(1, ArraySubmitted(job_id="300", offset=0, count=2, throttle=0))
    finisher = w.guard().finisher
    w.journal.record(1, SearcherShutdown(failure=False))
    finisher.finish(_exp(w))
    assert _exp(w).state == "ACTIVE"  # trial 1 still runs
    w.journal.record(1, RunEnded(trial_id=1, run_id=1, job_state="COMPLETED",
                     trial_state="COMPLETED", restarts=0))
    finisher.finish(_exp(w))
    assert _exp(w).state == "COMPLETED"
    assert w.runner.commands("scancel") == [["scancel", "300"]]  # tasks never used


def test_a_search_that_failed_stops_the_experiment_and_cancels_its_jobs(tmp_path: Path) -> None:
    w = two_experiments(tmp_path)
    w.journal.record(1, ExperimentErrorSet(message="no metric loss in the validation"))
    w.guard().finisher.finish(_exp(w))
    exp = _exp(w)
    assert (exp.state, exp.error) == ("STOPPING_ERROR", "no metric loss in the validation")
    assert w.runner.commands("scancel") == [["scancel", "101"]]
