"""Slot-hours of runs: the scheduler's account first, the run tree's times otherwise."""

from __future__ import annotations

from typing import Any

from hpcdet.records import RunRecord
from hpcdet.states import RunState
from hpcdet.views import usage


def _run(run_id: int = 1, trial_id: int = 1, **given: Any) -> RunRecord:
    fields: dict[str, Any] = {
        "id": run_id, "trial_id": trial_id, "run_id": run_id, "job_id": str(100 + run_id),
        "state": RunState.COMPLETED, "reason": "", "submitted": 0.0, "ended": None,
        "exit_code": 0, "preempt_acked": False, "outcome": "", "event_offset": 0,
        "event_seq": 0, "searcher_seq": 0, "first_op": 0, "ops_decided": 0, "started": None,
        "used_seconds": None, "used_gpus": None, "used_cpus": None, "usage_by": ""}
    return RunRecord(**{**fields, **given})


def test_the_schedulers_account_counts_the_gpus_it_allocated() -> None:
    run = _run(submitted=0.0, started=600.0, ended=4200.0, used_seconds=3600.0, used_gpus=4,
               used_cpus=16, usage_by="sacct")
    assert usage.run_usage(run, slots_per_trial=2) == usage.RunUsage(1, 1, 4.0, "sacct")
    # A CPU trial counts its one slot, whatever CPUs the job held.
    assert usage.run_usage(run, slots_per_trial=0) == usage.RunUsage(1, 1, 1.0, "sacct")


def test_the_run_tree_counts_from_its_first_node_to_its_end_times_its_slots() -> None:
    run = _run(submitted=0.0, started=600.0, ended=2400.0)
    assert usage.run_usage(run, slots_per_trial=2) == usage.RunUsage(1, 1, 1.0, usage.RUN_TREE)
    old = _run(submitted=0.0, ended=1800.0)  # ended before hpcdet kept its start
    assert usage.run_usage(old, 1) == usage.RunUsage(1, 1, 0.5, usage.SUBMITTED)
    assert usage.run_usage(_run(started=5.0), 1) is None  # still running


def test_a_total_names_its_sources_and_the_runs_not_counted() -> None:
    runs = [_run(1, started=0.0, ended=3600.0),
            _run(2, used_seconds=1800.0, used_gpus=1, usage_by="qstat", ended=9.0),
            _run(3, trial_id=2, started=0.0, ended=7200.0),
            _run(4, trial_id=2, started=10.0)]
    total = usage.total(runs, slots_per_trial=1)
    assert total == usage.Usage("GPU-hours", 3.5, (usage.RUN_TREE, "qstat"), 1)
    assert total.line() == ("3.50 GPU-hours (run tree, qstat); 1 run still running, "
                            "not counted")
    assert total.to_dict() == {"unit": "GPU-hours", "hours": 3.5,
                               "sources": ["run tree", "qstat"], "running": 1}
    assert {k: v.hours for k, v in usage.by_trial(runs, 1).items()} == {1: 1.5, 2: 2.0}
    assert usage.total([], 0).line() == "0.00 slot-hours"


def test_slots_of_a_stored_config() -> None:
    assert usage.slots_of({"resources": {"slots_per_trial": 4}}) == 4
    assert usage.slots_of({}) == 1
