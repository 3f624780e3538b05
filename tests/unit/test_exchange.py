from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hpcdet.exchange import (
    EventWriter,
    FileWatch,
    append_line,
    read_events,
    read_lines,
    write_atomic,
)


def test_events_round_trip_with_offsets(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    w = EventWriter(path)
    for i in range(3):
        w.emit("metrics", {"steps_completed": i, "v": math.inf if i == 2 else i})
    w.flush()
    events = read_events(path, 0)
    assert [e.seq for e in events] == [1, 2, 3]
    assert events[2].body["v"] == "Infinity"
    again = read_events(path, events[1].end_offset)
    assert [e.seq for e in again] == [3]


def test_a_torn_last_line_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"seq": 1, "type": "a"}\n{"seq": 2, "ty')
    assert [e.seq for e in read_events(path, 0)] == [1]


def test_a_journal_line_torn_by_a_kill_is_cut_off_before_the_next(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    append_line(path, {"kind": "a"})
    with open(path, "a") as f:
        f.write('{"kind": "b", "bo')  # the daemon died here
    assert [e["kind"] for e in read_lines(path)] == ["a"]
    append_line(path, {"kind": "c"})
    assert [e["kind"] for e in read_lines(path)] == ["a", "c"]


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


def test_write_atomic_and_filewatch(tmp_path: Path) -> None:
    path = tmp_path / "control.json"
    watch = FileWatch(path)
    assert not watch.changed()
    write_atomic(path, {"preempt": False})
    assert watch.changed() and not watch.changed()
    write_atomic(path, {"preempt": True})
    assert watch.changed()
    assert json.loads(path.read_text()) == {"preempt": True}
    assert [p.name for p in tmp_path.iterdir()] == ["control.json"]
