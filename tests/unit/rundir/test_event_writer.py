"""The trial side's event log writer (hpcdet.rundir.event_writer)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hpcdet.rundir.event_writer import MAX_HELD, EventWriter
from hpcdet.rundir.events import read_events


def test_a_new_writer_continues_the_sequence(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    w = EventWriter(path)
    w.emit("a", {})
    w.flush()
    w2 = EventWriter(path)
    w2.emit("b", {})
    w2.flush()
    assert [e.seq for e in read_events(path, 0)] == [1, 2]


def test_failed_write_keeps_the_batch(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    w = EventWriter(path)
    w.emit("a", {})
    w.flush()
    w.emit("b", {"x": object()})  # not serialisable: the flush fails before writing
    with pytest.raises(TypeError):
        w.flush()
    assert [e.seq for e in read_events(path, 0)] == [1]


def test_the_writer_holds_what_waits_for_a_sweep_and_not_what_the_daemon_decides_on(
        tmp_path: Path) -> None:
    w = EventWriter(tmp_path / "events.jsonl", hold=5.0)
    assert not w.due(time.monotonic())  # nothing to write
    w.emit("metrics", {"group": "training", "steps_completed": 1, "metrics": {"loss": 1.0}})
    w.emit("progress", {"progress": 0.1})
    now = time.monotonic()
    assert not w.due(now) and w.due(now + 5.0)
    w.emit("metrics", {"group": "validation", "steps_completed": 1, "metrics": {"loss": 1.0}})
    assert w.due(now)
    w.flush()
    assert not w.due(now + 5.0)
    for step in range(MAX_HELD):
        w.emit("metrics", {"group": "training", "steps_completed": step, "metrics": {}})
    assert w.due(time.monotonic())


def test_a_writer_resumed_after_a_torn_write_cuts_the_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    w = EventWriter(path)
    w.emit("status", {"v": 1})
    w.flush()
    with open(path, "a") as f:
        f.write('{"seq": 2, "type": "metr')  # the trial was killed mid-write
    resumed = EventWriter(path)
    resumed.emit("status", {"v": 2})
    resumed.flush()
    events = read_events(path, 0)
    assert [(e.seq, e.body["v"]) for e in events] == [(1, 1), (2, 2)]
    assert path.read_bytes().count(b"\n") == 2
