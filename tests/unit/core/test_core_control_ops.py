"""Daemon-fed searcher operations: control.json's "ops" and "decided", against real files."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpcdet import core
from hpcdet.core import _searcher
from hpcdet.core._searcher import ControlOps, has_daemon_ops
from hpcdet.rundir.atomic import write_atomic
from hpcdet.rundir.events import read_events
from hpcdet.rundir.filewatch import FileWatch
from tests.unit.core.core_fakes import FakeRun, make_run


def _control(ops: list[int], decided: int, preempt: bool = False, reason: str = "") -> Any:
    return {"preempt": preempt, "reason": reason, "best_validation": None, "ops": ops,
            "decided": decided}


class FakeDaemon:
    """Plays the daemon: counts the run's searcher_completed events and publishes decisions.

    ``more_ops`` maps a number of completed operations to the ops list the daemon publishes
    once it has processed that many (a promotion appends an operation).
    """

    def __init__(
        self, run_dir: Path, ops: list[int], more_ops: dict[int, list[int]] | None = None
    ) -> None:
        self.control = run_dir / "control.json"
        self.events = run_dir / "events.jsonl"
        self.ops = list(ops)
        self.more_ops = more_ops or {}
        self.decided = 0
        self.decided_at: list[float] = []
        write_atomic(self.control, _control(self.ops, 0))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> FakeDaemon:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            done = sum(1 for e in read_events(self.events, 0) if e.type == "searcher_completed")
            if done > self.decided:
                self.decided = done
                self.ops = self.more_ops.get(done, self.ops)
                write_atomic(self.control, _control(self.ops, done))
                self.decided_at.append(time.monotonic())


def _later(delay: float, fn: Any, *args: Any) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        fn(*args)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.fixture
def control(tmp_path: Path) -> Path:
    return tmp_path / "control.json"


def test_has_daemon_ops(control: Path) -> None:
    assert not has_daemon_ops(control)
    write_atomic(control, {"preempt": False, "reason": "", "best_validation": None})
    assert not has_daemon_ops(control)
    write_atomic(control, _control([], 0))
    assert has_daemon_ops(control)


def test_first_operation_needs_no_decision(control: Path) -> None:
    write_atomic(control, _control([10, 40], 0))
    flushes: list[int] = []
    ops = ControlOps(control, lambda: flushes.append(1))
    assert ops.next_length() == 10
    assert flushes == [1]


def test_out_of_ops_is_none(control: Path) -> None:
    write_atomic(control, _control([], 0))
    assert ControlOps(control, lambda: None).next_length() is None


def test_waits_for_the_decision_then_gives_the_next_op(control: Path) -> None:
    write_atomic(control, _control([10], 0))
    ops = ControlOps(control, lambda: None)
    assert ops.next_length() == 10
    _later(0.3, write_atomic, control, _control([10, 40], 1))
    start = time.monotonic()
    assert ops.next_length() == 40
    assert time.monotonic() - start >= 0.3
    # Decided, and nothing more for this run.
    _later(0.1, write_atomic, control, _control([10, 40], 2))
    assert ops.next_length() is None


def test_decision_reaches_the_trial_quickly(control: Path) -> None:
    write_atomic(control, _control([10], 0))
    ops = ControlOps(control, lambda: None)
    ops.next_length()
    written: list[float] = []

    def decide() -> None:
        write_atomic(control, _control([10, 40], 1))
        written.append(time.monotonic())

    _later(0.4, decide)
    assert ops.next_length() == 40
    assert time.monotonic() - written[0] < 0.5


class _CountingWatch(FileWatch):
    stats = 0

    def changed(self) -> bool:
        type(self).stats += 1
        return super().changed()


def test_waiting_is_not_busy(control: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_searcher, "FileWatch", _CountingWatch)
    write_atomic(control, _control([10], 0))
    ops = ControlOps(control, lambda: None)
    ops.next_length()
    _CountingWatch.stats = 0
    _later(1.0, write_atomic, control, _control([10, 40], 1))
    cpu, began = time.thread_time(), time.monotonic()
    assert ops.next_length() == 40
    # About one check per 0.15 s, each a stat, sleeping in between (the wait may last longer
    # than 1 s on a loaded machine: the checks are counted against how long it lasted).
    waited = time.monotonic() - began
    assert 3 <= _CountingWatch.stats <= waited / 0.15 + 2, (_CountingWatch.stats, waited)
    assert time.thread_time() - cpu < 0.1


def test_daemon_preemption_while_waiting_is_none(
    control: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hpcdet.core")
    write_atomic(control, _control([10], 0))
    ops = ControlOps(control, lambda: None)
    ops.next_length()
    _later(0.3, write_atomic, control, _control([10], 0, preempt=True, reason="pause"))
    assert ops.next_length() is None
    assert any(
        "stopped waiting for the searcher's next operation" in m and "pause" in m
        for m in caplog.messages
    )


def test_preemption_before_a_decided_op_does_not_withhold_it(control: Path) -> None:
    write_atomic(control, _control([10], 0, preempt=True, reason="pause"))
    assert ControlOps(control, lambda: None).next_length() == 10


def test_malformed_ops_are_refused(control: Path) -> None:
    write_atomic(control, _control(["10"], 0))  # type: ignore[list-item]
    with pytest.raises(ValueError, match="'ops' must be a list of integers"):
        ControlOps(control, lambda: None).next_length()


# Through core.init(): the run's event log, the preemption watcher, the searcher context.


@pytest.fixture
def daemon_run(on_cluster: FakeRun) -> FakeRun:
    """A run whose config has no max_length: the daemon alone decides the lengths."""
    return on_cluster


def test_two_ops_delivered_in_sequence(daemon_run: FakeRun) -> None:
    with FakeDaemon(daemon_run.run_dir, [10], more_ops={1: [10, 40]}) as daemon:
        with core.init() as ctx:
            lengths = []
            for op in ctx.searcher.operations():
                lengths.append(op.length)
                op.report_completed(float(op.length))
    assert lengths == [10, 40]
    assert [(b["length"], b["metric"]) for b in daemon_run.bodies("searcher_completed")] == [
        (10, 10.0), (40, 40.0)
    ]
    assert daemon.decided == 2


def test_completion_and_decision_round_trip_within_half_a_second(daemon_run: FakeRun) -> None:
    with FakeDaemon(daemon_run.run_dir, [10, 40]) as daemon:
        with core.init() as ctx:
            ops = ctx.searcher.operations()
            next(ops).report_completed(1.0)
            start = time.monotonic()
            # The flush before waiting lets the daemon see the completion at once, not after
            # the event writer's next periodic write.
            assert next(ops).length == 40
            assert time.monotonic() - start < 0.5
            assert daemon.decided_at[0] - start < 0.3


def test_scheduler_preemption_while_waiting_ends_the_ops(daemon_run: FakeRun) -> None:
    write_atomic(daemon_run.run_dir / "control.json", _control([10], 0))
    with core.init() as ctx:
        ops = ctx.searcher.operations()
        next(ops).report_completed(1.0)
        _later(0.2, (daemon_run.run_dir / "preempt").touch)
        start = time.monotonic()
        assert list(ops) == []
        assert time.monotonic() - start < 2.0
        assert ctx.preempt.should_preempt()


def test_an_op_left_unfinished_is_offered_again(daemon_run: FakeRun) -> None:
    write_atomic(daemon_run.run_dir / "control.json", _control([10, 40], 0))
    with core.init() as ctx:
        for op in ctx.searcher.operations():
            assert op.length == 10
            break
        with FakeDaemon(daemon_run.run_dir, [10, 40]):
            lengths = []
            for op in ctx.searcher.operations():
                lengths.append(op.length)
                op.report_completed(0.0)
    assert lengths == [10, 40]


@pytest.fixture
def stage3_run(tmp_path: Path) -> Iterator[FakeRun]:
    config = {"searcher": {"name": "adaptive_asha", "metric": "x", "max_trials": 10,
                           "max_length": 100}}
    yield make_run(tmp_path, config=config, hparams={"increment_by": 3})


def test_stage3_tutorial_with_daemon_fed_ops(stage3_run: FakeRun) -> None:
    with FakeDaemon(stage3_run.run_dir, [10, 40]) as daemon:
        proc = stage3_run.run_script("3_hpsearch.py")
    assert proc.returncode == 0, proc.stderr
    completed = stage3_run.bodies("searcher_completed")
    assert [(c["length"], c["metric"]) for c in completed] == [(10, 30.0), (40, 120.0)]
    assert [c["steps_completed"] for c in stage3_run.bodies("checkpoint")] == [10, 20, 30, 40]
    assert daemon.decided == 2
    assert "the searcher has no further operation for this run (2 done)" in proc.stderr
