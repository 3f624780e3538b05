"""Guard: one experiment's failing step ends that experiment, not the daemon."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from hpcdet.errors import StoreError
from hpcdet.store.models import Run
from tests.unit.daemon.services.support import two_experiments


def test_a_failing_step_stops_its_experiment_with_the_reason(tmp_path: Path) -> None:
    w = two_experiments(tmp_path)
    guard = w.guard()
    with guard(1, "writing a control file"):
        raise ValueError("boom")
    exp = w.store.experiment(1)
    assert exp.state == "STOPPING_ERROR"
    assert exp.error == "writing a control file failed: ValueError: boom"
    assert w.runner.commands("scancel") == [["scancel", "101"]]
    assert w.store.experiment(2).state == "ACTIVE"


def test_stopping_a_failed_experiment_that_fails_too_ends_it_at_once(tmp_path: Path) -> None:
    w = two_experiments(tmp_path)
    guard = w.guard()
    guard.fail(1, "first")
    guard.fail(1, "second")
    exp = w.store.experiment(1)
    assert (exp.state, exp.error) == ("ERROR", "first; stopping it failed too: second")
    assert {r.state for r in w.store.runs()} == {"CANCELED"}


def test_database_and_disk_full_errors_are_the_daemons(tmp_path: Path) -> None:
    w = two_experiments(tmp_path)
    guard = w.guard()
    with pytest.raises(StoreError):
        with guard(1, "ingest"):
            raise StoreError("database is locked")
    with pytest.raises(OSError):
        with guard(1, "ingest"):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert w.store.experiment(1).state == "ACTIVE"


def test_an_io_error_skips_the_step_for_some_rounds_then_fails_the_experiment(
        tmp_path: Path) -> None:
    w = two_experiments(tmp_path)
    guard = w.guard()
    guard.io_retry_rounds, guard.io_retry_seconds = 3, 0.0
    skipped = 0
    for _ in range(3):
        guard.new_round()
        with guard(1, "reading an exit file", (1, 1)):
            raise OSError(errno.EIO, "Input/output error", "/x/exit.json")
        if w.store.experiment(1).state == "ACTIVE":  # skipped for the round, not raised
            skipped += 1
            [fault] = guard.current_faults()
            assert (fault.experiment_id, fault.step, fault.run, fault.path, fault.rounds) == (
                1, "reading an exit file", (1, 1), "/x/exit.json", skipped)
            assert fault.error == "OSError: [Errno 5] Input/output error: '/x/exit.json'"
    assert skipped == 2
    assert w.store.experiment(1).state == "STOPPING_ERROR"
    assert "reading an exit file failed: OSError: [Errno 5]" in w.store.experiment(1).error
    assert [f.rounds for f in guard.current_faults()] == [3]  # as long as it lasts


def test_a_fault_passes_when_its_step_goes_through_in_a_later_round(tmp_path: Path) -> None:
    w = two_experiments(tmp_path)
    w.trial(2, 2)
    w.run(2, 2, job_id="102")
    guard = w.guard()
    guard.io_retry_rounds, guard.io_retry_seconds = 2, 0.0
    failing = {1}

    def step(run: Run) -> None:
        if run.trial_id in failing:
            raise OSError(errno.ELOOP, "Too many levels of symbolic links", "events.jsonl")

    guard.new_round()
    guard.each_run("ingest", step, w.store.runs())
    assert [(f.experiment_id, f.run) for f in guard.current_faults()] == [(1, (1, 1))]
    failing.clear()
    guard.new_round()
    guard.each_run("ingest", step, w.store.runs())
    assert guard.current_faults() == []
    # The same error again is a new fault: its rounds count from one.
    failing.add(1)
    guard.new_round()
    guard.each_run("ingest", step, w.store.runs())
    assert [f.rounds for f in guard.current_faults()] == [1]
    assert {e.state for e in w.store.experiments()} == {"ACTIVE"}


def test_a_search_that_cannot_start_for_an_io_error_raises_it_to_its_caller(
        tmp_path: Path) -> None:
    w = two_experiments(tmp_path)
    guard = w.guard()
    guard.new_round()
    with pytest.raises(OSError):
        with guard(2, "starting the search", deferrable=False):
            raise OSError(errno.ESTALE, "Stale file handle")
    assert w.store.experiment(2).state == "ACTIVE"


def test_each_run_guards_each_run_by_its_experiment(tmp_path: Path) -> None:
    w = two_experiments(tmp_path)
    w.trial(2, 2)
    w.run(2, 2, job_id="102")
    seen = []

    def step(run: object) -> None:
        seen.append(run)
        raise RuntimeError("bad")

    w.guard().each_run("ending a run", step, w.store.runs())
    assert len(seen) == 2
    assert {e.state for e in w.store.experiments()} == {"STOPPING_ERROR"}
