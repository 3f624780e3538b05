"""The estimate `experiment create` prints: the plan, and hours at a measured speed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hpcdet.records import TrialRecord
from hpcdet.search.estimate import Plan
from hpcdet.states import RunState, TrialState
from hpcdet.views.estimate import Estimate, Speed, _length, _measured, _unit
from tests.unit.views.test_usage import _run


def _trial(trial_id: int, **given: Any) -> TrialRecord:
    fields: dict[str, Any] = {
        "id": trial_id, "experiment_id": 1, "request_id": trial_id, "ops": (), "ops_completed": 0,
        "closed": True, "stop_requested": False, "early_exit": "", "exit_reported": True,
        "state": TrialState.COMPLETED, "hparams": {}, "trial_seed": 0, "restarts": 0,
        "run_id": 1, "latest_checkpoint": None, "steps_completed": 0, "progress": 1.0,
        "status": "", "metadata": {}, "alerts": [], "best_validation": None, "end_reason": "",
        "started": 0.0, "ended": 1.0}
    return TrialRecord(**{**fields, **given})


def test_the_hours_of_the_plan_at_the_measured_speed() -> None:
    plan = Plan(16, 1000, "batches", 3808)
    found = Estimate("mnist", plan, 2, "GPU-hours", Speed(0.5, 3, 2))
    assert found.hours == 3808 * 0.5 * 2 / 3600
    assert found.lines() == [
        "This search runs at most 16 trials of 2 GPUs each, 3808 batches in all as the "
        "searcher plans them (at most 1000 a trial).",
        "About 1.1 GPU-hours, at 0.5 s per batch measured on 3 completed trials of 2 earlier "
        "experiments named 'mnist'."]
    unmeasured = replace(found, speed=None)
    assert unmeasured.hours is None and "no estimate of its hours" in unmeasured.lines()[1]
    undecided = Estimate("x", Plan(1, None, "units", None), 1, "slot-hours", None)
    assert undecided.lines() == ["This search runs at most 1 trial of 1 slot each, of a length "
                                 "the trials decide: no estimate of its hours."]


def test_only_trials_that_ran_their_length_are_measured() -> None:
    runs = [_run(1, trial_id=1, started=0.0, ended=100.0),
            _run(2, trial_id=1, used_seconds=50.0, usage_by="sacct", ended=1.0),
            _run(1, trial_id=2, started=0.0, ended=100.0),
            _run(1, trial_id=3, started=0.0, ended=40.0),
            _run(1, trial_id=4, ended=10.0),  # no start kept: not measured
            _run(1, trial_id=5, started=0.0, ended=10.0, state=RunState.FAILED)]
    trials = [_trial(1, ops=(100, 300), ops_completed=2),  # 150 s for 300
              _trial(2, stop_requested=True),  # stopped early by the searcher
              _trial(3),  # the searcher's length, 200, in 40 s
              _trial(4),
              _trial(5, state=TrialState.ERROR)]
    assert _measured(trials, runs, 200) == (190.0, 500, 2)


def test_the_unit_and_length_of_a_stored_searcher() -> None:
    legacy = {"searcher": {"max_length": {"epochs": 3}}}
    current = {"searcher": {"time_metric": "batches", "max_time": 500, "max_length": None}}
    assert (_unit(legacy), _length(legacy)) == ("epochs", 3)
    assert (_unit(current), _length(current)) == ("batches", 500)
    assert (_unit({}), _length({})) == ("units", 0)
