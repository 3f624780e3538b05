from __future__ import annotations

import dataclasses
import json
import os
import random
import shlex
from pathlib import Path

import pytest

from hpcdet.cli.common import when
from hpcdet.cli.job import _status
from hpcdet.priority import PendingJob, nice_for, plan_nice, position_between, validate
from hpcdet.records import ExperimentRecord, RunRecord, TrialRecord
from hpcdet.schedulers.base import JobStatus
from hpcdet.schedulers.pbs import PbsScheduler
from hpcdet.states import JobState
from hpcdet.store import decode
from hpcdet.store.models import Experiment, Run, Trial
from hpcdet.views.queue import queue, scheduler_statuses


def _exp(i: int, priority: int | None = None, slots: int = 1) -> ExperimentRecord:
    return decode.experiment(vars(Experiment(id=i, name=f"e{i}", config_json=json.dumps(
        {"resources": {"slots_per_trial": slots}}), created=float(i), priority=priority,
        position=float(i))))


def _trial(**columns: object) -> TrialRecord:
    return decode.trial(vars(Trial(**columns)))


def _run(**columns: object) -> RunRecord:
    return decode.run(vars(Run(**columns)))


def _job(job_id: int, position: float, priority: int = 42, raw: int = 1000, nice: int = 0,
         partition: str = "debug") -> PendingJob:
    return PendingJob(str(job_id), partition, priority, position, raw - nice, nice)


def _slurm_order(jobs: list[PendingJob], plan: dict[str, int]) -> list[str]:
    """The order Slurm starts pending jobs in: higher priority first, then lower job id."""
    def effective(j: PendingJob) -> int:
        return j.scheduler_priority + j.nice - plan[j.job_id]
    return [j.job_id for j in sorted(jobs, key=lambda j: (-effective(j), int(j.job_id)))]


def test_default_priorities_keep_nice_zero() -> None:
    jobs = [_job(10, 1), _job(11, 2), _job(12, 3)]
    assert plan_nice(jobs) == {"10": 0, "11": 0, "12": 0}


def test_priority_above_default_is_nice_in_proportion() -> None:
    plan = plan_nice([_job(10, 1), _job(11, 2, priority=45), _job(12, 3)])
    assert plan == {"10": 0, "11": 300, "12": 0}


def test_ahead_of_gives_the_jobs_passed_the_smallest_nice_that_orders_them() -> None:
    # Submitted A=10, B=11, C=12; C moved ahead of A: Slurm must start C, A, B.
    jobs = [_job(10, 1), _job(11, 2), _job(12, 0.5)]
    plan = plan_nice(jobs)
    assert plan == {"12": 0, "10": 1, "11": 1}
    assert _slurm_order(jobs, plan) == ["12", "10", "11"]
    # Once C has started, A and B are back at nice 0: no lasting penalty.
    assert plan_nice(jobs[:2]) == {"10": 0, "11": 0}


def test_nice_already_set_is_read_back_and_lowered() -> None:
    # A job left at nice 5 by an earlier order that no longer holds returns to 0.
    assert plan_nice([_job(10, 1, nice=5), _job(11, 2)]) == {"10": 0, "11": 0}


def test_partitions_are_ordered_independently() -> None:
    jobs = [_job(10, 1, partition="a"), _job(11, 0.5, partition="b")]
    assert plan_nice(jobs) == {"10": 0, "11": 0}


def test_older_jobs_with_more_priority_are_put_behind() -> None:
    jobs = [_job(10, 2, raw=1005), _job(11, 1, raw=1000)]
    plan = plan_nice(jobs)
    assert plan == {"11": 0, "10": 6}
    assert _slurm_order(jobs, plan) == ["11", "10"]


def test_plan_orders_random_queues_minimally() -> None:
    rng = random.Random(7)
    for _ in range(300):
        jobs = [_job(100 + i, rng.choice([0.5, 1, 2, 3, 3.5]) + i / 100,
                     rng.choice([10, 42, 42, 42, 43, 50]), rng.randint(990, 1010),
                     rng.choice([0, 0, 3]))
                for i in range(rng.randint(1, 7))]
        plan = plan_nice(jobs)
        wanted = [j.job_id for j in sorted(jobs, key=lambda j: (j.priority, j.position))]
        assert _slurm_order(jobs, plan) == wanted
        for j in jobs:
            assert plan[j.job_id] >= nice_for(j.priority)
            if plan[j.job_id] > nice_for(j.priority):  # one less would break the order
                less = {**plan, j.job_id: plan[j.job_id] - 1}
                assert _slurm_order(jobs, less) != wanted


def test_positions_between_neighbours() -> None:
    assert position_between(1.0, 2.0) == 1.5
    assert position_between(None, 2.0) == 1.0 and position_between(3.0, None) == 4.0


def test_priority_maps_to_nice_without_penalising_the_default() -> None:
    assert nice_for(None) == nice_for(42) == nice_for(1) == 0
    assert nice_for(43) == 100 and nice_for(60) == 1800
    with pytest.raises(ValueError, match="between 1 and 99"):
        validate(0)


def test_queue_order_unsubmitted_then_pending_by_priority_then_running() -> None:
    exps = [_exp(1), _exp(2, slots=4), _exp(3), _exp(4, 50)]
    trials = [_trial(id=10 + i, experiment_id=i, state="ACTIVE") for i in (1, 2, 3)]
    trials.append(_trial(id=14, experiment_id=4, state="QUEUED"))
    runs = [_run(trial_id=11, run_id=1, job_id="101", state="RUNNING", submitted=0),
            _run(trial_id=12, run_id=1, job_id="102", state="PENDING", submitted=0),
            _run(trial_id=13, run_id=1, job_id="103", state="PENDING", submitted=0)]
    statuses = {
        "101": JobStatus(JobState.RUNNING, priority=1000),
        "102": JobStatus(JobState.PENDING, "waiting for nodes", priority=900, start=5000.0),
        "103": JobStatus(JobState.PENDING, priority=1000),
    }
    rows = queue(exps, trials, runs, statuses)
    assert [r.job_id for r in rows] == ["4", "3", "2", "1"]
    by_id = {r.job_id: r for r in rows}
    assert (by_id["1"].state, by_id["1"].acquired, by_id["1"].needed) == ("SCHEDULED", 1, 1)
    assert (by_id["2"].state, by_id["2"].needed, by_id["2"].reason) == (
        "QUEUED", 4, "waiting for nodes")
    assert by_id["4"].priority == 50 and by_id["3"].priority == 42
    assert (by_id["2"].expected_start, by_id["3"].expected_start) == (5000.0, None)
    assert _status(by_id["2"]) == (f"QUEUED (waiting for nodes; expected to start "
                                   f"{when(5000.0)})")
    assert _status(by_id["3"]) == "QUEUED" and _status(by_id["1"]) == "SCHEDULED"


def test_pending_ties_go_by_job_id_as_slurm_starts_them() -> None:
    exps = [_exp(1), _exp(2)]
    trials = [_trial(id=11, experiment_id=1, state="ACTIVE"),
              _trial(id=12, experiment_id=2, state="ACTIVE")]
    runs = [_run(trial_id=11, run_id=1, job_id="205", state="PENDING", submitted=0),
            _run(trial_id=12, run_id=1, job_id="204", state="PENDING", submitted=0)]
    statuses = {"205": JobStatus(JobState.PENDING, priority=1000),
                "204": JobStatus(JobState.PENDING, priority=1000)}
    assert [r.job_id for r in queue(exps, trials, runs, statuses)] == ["2", "1"]


def test_a_pool_filter_matches_the_pool_or_the_partition_its_jobs_are_in() -> None:
    exps = [_exp(1), _exp(2)]
    exps[1] = dataclasses.replace(exps[1], resource_pool="gpu")
    trials = [_trial(id=11, experiment_id=1, state="ACTIVE"),
              _trial(id=12, experiment_id=2, state="ACTIVE")]
    runs = [_run(trial_id=11, run_id=1, job_id="301", state="PENDING", submitted=0)]
    statuses = {"301": JobStatus(JobState.PENDING, priority=1000, partition="debug")}
    rows = {r.job_id: r for r in queue(exps, trials, runs, statuses)}
    assert rows["1"].in_pool("debug") and rows["1"].in_pool("default")
    assert not rows["1"].in_pool("gpu")
    assert rows["2"].in_pool("gpu") and not rows["2"].in_pool("debug")


def test_job_list_says_why_qstat_gave_no_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             ) -> None:
    # A qstat that answers as 23.06.06 does for -u with -F json (exit 0): not "no jobs".
    sample = Path(__file__).parents[1] / "schedulers" / "pbs_samples" / "qstat-f-json-t-u.json"
    qstat = tmp_path / "qstat"
    qstat.write_text(f"#!/bin/sh\ncat {shlex.quote(str(sample))}\n")
    qstat.chmod(0o700)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    statuses, why = scheduler_statuses(PbsScheduler())
    assert statuses == {} and "text table" in why
