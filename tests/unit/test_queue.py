from __future__ import annotations

import json

import pytest

from hpcdet.priority import nice_for, validate, wants_top
from hpcdet.queue import queue
from hpcdet.schedulers.base import JobState, JobStatus
from hpcdet.store.models import Experiment, Run, Trial


def _exp(i: int, priority: int | None = None, slots: int = 1) -> Experiment:
    return Experiment(id=i, name=f"e{i}", config_json=json.dumps(
        {"resources": {"slots_per_trial": slots}}), created=float(i), priority=priority)


def test_priority_maps_to_nice_without_penalising_the_default() -> None:
    assert nice_for(None) == nice_for(42) == nice_for(1) == 0
    assert nice_for(43) == 100 and nice_for(60) == 1800
    assert wants_top(41) and not wants_top(42) and not wants_top(None)
    with pytest.raises(ValueError, match="between 1 and 99"):
        validate(0)


def test_queue_order_unsubmitted_then_pending_by_priority_then_running() -> None:
    exps = [_exp(1), _exp(2, slots=4), _exp(3), _exp(4, 50)]
    trials = [Trial(id=10 + i, experiment_id=i, state="ACTIVE") for i in (1, 2, 3)]
    trials.append(Trial(id=14, experiment_id=4, state="QUEUED"))
    runs = [Run(trial_id=11, run_id=1, job_id="101", state="RUNNING", submitted=0),
            Run(trial_id=12, run_id=1, job_id="102", state="PENDING", submitted=0),
            Run(trial_id=13, run_id=1, job_id="103", state="PENDING", submitted=0)]
    statuses = {
        "101": JobStatus(JobState.RUNNING, priority=1000),
        "102": JobStatus(JobState.PENDING, "waiting for nodes", priority=900),
        "103": JobStatus(JobState.PENDING, priority=1000),
    }
    rows = queue(exps, trials, runs, statuses)
    assert [r.job_id for r in rows] == ["4", "3", "2", "1"]
    by_id = {r.job_id: r for r in rows}
    assert (by_id["1"].state, by_id["1"].acquired, by_id["1"].needed) == ("SCHEDULED", 1, 1)
    assert (by_id["2"].state, by_id["2"].needed, by_id["2"].reason) == (
        "QUEUED", 4, "waiting for nodes")
    assert by_id["4"].priority == 50 and by_id["3"].priority == 42
