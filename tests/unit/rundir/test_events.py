"""Reading a run's event log (hpcdet.rundir.events)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hpcdet.rundir.event_writer import EventWriter
from hpcdet.rundir.events import read_event_batch, read_events


def test_events_round_trip_with_offsets(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    w = EventWriter(path)
    for i in range(3):
        w.emit("status", {"steps_completed": i, "v": math.inf if i == 2 else i})
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


def test_a_corrupt_middle_line_is_skipped_and_reported_with_its_offset(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "events.jsonl"
    first = b'{"seq": 1, "type": "a"}\n'
    glued = b'{"seq": 2, "type": "b", "x{"seq": 3, "type": "c"}\n'
    path.write_bytes(first + glued + b'{"seq": 4, "type": "d"}\n[1]\n\xff\xfe\n')
    batch = read_event_batch(path, 0)
    assert [e.seq for e in batch.events] == [1, 4]
    assert batch.end_offset == path.stat().st_size
    offsets = [len(first), len(first) + len(glued) + 24, len(first) + len(glued) + 28]
    assert [f"{path} at byte offset {o}" in caplog.text for o in offsets] == [True] * 3
    assert read_event_batch(path, batch.end_offset).events == []


def test_an_event_without_seq_or_type_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"type": "a"}\n{"seq": true, "type": "b"}\n{"seq": 3, "type": "c"}\n')
    assert [e.seq for e in read_events(path, 0)] == [3]


def test_metrics_lines_read_by_the_pattern_are_the_events_a_decode_gives(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "events.jsonl"
    w = EventWriter(path)
    plain = {"loss": 0.5, "name": "a b", "nan": math.nan, "big": 10**20, "ok": False}
    w.emit("metrics", {"group": "training", "steps_completed": 1, "metrics": plain,
                       "batch_metrics": None})
    w.emit("progress", {"progress": 0.5})
    w.emit("metrics", {"group": "validation", "steps_completed": 1, "metrics": {}})
    for odd in ({"nested": {"a": [1]}}, {"é": 1}, {"quote\"": 1}):  # decoded instead
        w.emit("metrics", {"group": "training", "steps_completed": 2, "metrics": odd})
        w.flush()  # a line each: in one flush they make one chunk line
    # A blank line, then a torn line with a whole one glued on: it ends as a metrics line does.
    torn = b'{"seq":8,"type":"metrics","time":1.5,"group":"g","steps_completed":1,"metrics":{"lo'
    with open(path, "ab") as f:
        f.write(b"\n" + torn + path.read_bytes().splitlines(keepends=True)[0])
    lines = path.read_bytes().splitlines()
    batch = read_event_batch(path, 0)
    every = read_events(path, 0)
    decoded = [json.loads(line) for line in lines if line and not line.startswith(torn)]
    assert [(e.seq, e.type, dict(e.body)) for e in every] == [
        (d.pop("seq"), d.pop("type"), d) for d in decoded]
    # The feed's: all but the training report the pattern read.
    assert batch.events == [e for e in every if e.seq != 1]
    assert (batch.first_seq, batch.last_seq) == (1, 6)
    assert batch.end_offset == path.stat().st_size
    assert [e.end_offset for e in every] == [
        sum(len(line) + 1 for line in lines[:i + 1]) for i, line in enumerate(lines)
        if line and not line.startswith(torn)]
    assert f"{path} at byte offset {sum(len(x) + 1 for x in lines[:7])}" in caplog.text
    metric_lines = batch.metric_lines
    assert (metric_lines.seqs, metric_lines.groups) == ([1, 3], ["training", "validation"])
    assert [json.loads(m) for m in metric_lines.metrics_json] == [{**plain, "nan": "NaN"}, {}]
    assert [e.seq for e in batch.others] == [2, 4, 5, 6]


def test_a_batch_reads_whole_lines_up_to_its_limit_and_the_rest_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log that grew while the daemon was stopped is read a bounded batch at a time: whole
    lines within the limit, or the one line that is longer than it; blank lines are passed."""
    path = tmp_path / "events.jsonl"
    long = json.dumps({"seq": 2, "type": "status", "text": "x" * 300})
    path.write_text('{"seq":1,"type":"a"}\n' + long + '\n\n\n{"seq":3,"type":"b"}\n')
    monkeypatch.setattr("hpcdet.rundir.events.BATCH_BYTES", 64)
    first = read_event_batch(path, 0)
    assert [e.seq for e in first.events] == [1]
    second = read_event_batch(path, first.end_offset)  # read on to the long line's end
    assert second.events[0].body["text"] == "x" * 300
    assert second.end_offset == path.stat().st_size  # past the blank lines too
    path.write_text("\n" * 100)
    assert read_event_batch(path, 0).end_offset == 64  # blank lines alone are passed
    path.write_text('{"seq":1,"type":"a"}\n' + long + '\n\n\n{"seq":3,"type":"b"}\n')
    assert [e.seq for e in read_events(path, 0)] == [1, 2, 3]
    assert EventWriter(path)._seq == 3  # a writer reopening the log finds its last seq
