from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from hpcdet.rundir.exchange import (
    MAX_HELD,
    ChunkColumns,
    Chunks,
    EventWriter,
    FileWatch,
    append_line,
    metric_values,
    read_event_batch,
    read_events,
    read_lines,
    whole_lines,
    write_atomic,
    write_text_atomic,
)


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


def test_a_journal_line_torn_by_a_kill_is_cut_off_before_the_next(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    append_line(path, {"kind": "a"})
    with open(path, "a") as f:
        f.write('{"kind": "b", "bo')  # the daemon died here
    assert [e["kind"] for e in read_lines(path)] == ["a"]
    append_line(path, {"kind": "c"})
    assert [e["kind"] for e in read_lines(path)] == ["a", "c"]


def test_an_append_says_where_its_line_starts_after_the_torn_tail_was_cut(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    assert append_line(path, {"kind": "a"}) == 0
    size = path.stat().st_size
    with open(path, "a") as f:
        f.write('{"kind": "b", "bo')
    assert append_line(path, {"kind": "c"}) == size


def test_whole_lines_read_in_chunks_give_each_line_with_its_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hpcdet.rundir.exchange._READ_CHUNK", 5)
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"kind": "a"}\n\n{"kind": "bb"}\n{"kind": "c')
    assert list(whole_lines(path)) == [(0, 14, {"kind": "a"}), (15, 30, {"kind": "bb"})]
    assert list(whole_lines(path, 15)) == [(15, 30, {"kind": "bb"})]


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


def test_a_corrupt_journal_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text('{"kind": "a"}\n{"kind": "b", "x{"kind": "c"}\n{"kind": "d"}\n')
    assert [e["kind"] for e in read_lines(path)] == ["a", "d"]


def test_an_event_without_seq_or_type_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"type": "a"}\n{"seq": true, "type": "b"}\n{"seq": 3, "type": "c"}\n')
    assert [e.seq for e in read_events(path, 0)] == [3]


def test_atomic_writes_follow_the_umask(tmp_path: Path) -> None:
    """0600 by default, and readable by the group when the cluster config shares with one
    (the shared umask 027), like every other file hpcdet writes."""
    before = os.umask(0o027)
    try:
        write_atomic(tmp_path / "shared.json", {"a": 1})
        os.umask(0o077)
        write_atomic(tmp_path / "private.json", {"a": 1})
    finally:
        os.umask(before)
    assert (tmp_path / "shared.json").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "private.json").stat().st_mode & 0o777 == 0o600


def test_write_text_atomic_replaces_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "hostfile-7.1.txt"
    write_text_atomic(path, "old\n")
    write_text_atomic(path, "localhost slots=2\n")
    assert path.read_text() == "localhost slots=2\n"
    assert os.listdir(path.parent) == [path.name]


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


def test_a_metric_value_is_found_in_the_text_the_pattern_read(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    w = EventWriter(path)
    metrics = {"myloss": 9.0, "note": "loss,x", "loss": -2.5e-3, "acc": 1, "ok": True,
               "bad": math.nan, "huge": 1e308 * 10, "last": 7}
    w.emit("metrics", {"group": "validation", "steps_completed": 1, "metrics": metrics})
    w.flush()
    [text] = read_event_batch(path, 0).metric_lines.metrics_json
    found = {name: metric_values([text], name) for name in [*metrics, "missing", 'lo"ss']}
    assert found == {"myloss": [9.0], "note": [], "loss": [-2.5e-3], "acc": [1.0], "ok": [],
                     "bad": [], "huge": [], "last": [7.0], "missing": [], 'lo"ss': []}
    assert metric_values([text, '{"loss":1}', "{}", text], "loss") == [-2.5e-3, 1.0, -2.5e-3]
    assert metric_values([text, '{"last":1}'], "last") == [7.0, 1.0]
    # Numbers past a float's range, as a line the trial did not write through json may hold.
    assert metric_values(['{"loss":1e999}', '{"loss":-1e999,"x":1}'], "loss") == []


def test_a_chunk_line_holds_the_consecutive_plain_reports_of_a_group(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    w = EventWriter(path)
    emitted: list[tuple[str, dict[str, Any]]] = [
        *(("metrics", {"group": "training", "steps_completed": s, "metrics": {"loss": s},
                       "batch_metrics": None}) for s in (1, 2, 3)),
        ("metrics", {"group": "validation", "steps_completed": 3, "metrics": {"loss": 1},
                     "batch_metrics": None}),
        ("metrics", {"group": "test", "steps_completed": 3, "metrics": {"x": "a b"},
                     "batch_metrics": None}),
        ("metrics", {"group": "test", "steps_completed": 4, "metrics": {"x": "c"},
                     "batch_metrics": None}),
        ("metrics", {"group": "training", "steps_completed": 4, "metrics": {"loss": 4},
                     "batch_metrics": [{"loss": 4}]}),
        ("progress", {"progress": 0.5}),
    ]
    for type_, body in emitted:
        w.emit(type_, body)
    w.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(line["seq"], line.get("steps", line.get("steps_completed"))) for line in lines] == [
        (1, [1, 2, 3]), (2, 3), (3, [3, 4]), (4, 4), (5, None)]
    assert lines[0]["columns"] == {"loss": [1, 2, 3]}
    batch = read_event_batch(path, 0)
    # The first is signed, the second checked value by value: not all of them checked.
    assert batch.metric_lines.chunks == Chunks(
        [0, 2], ["1,2,3", "3,4"], [3, 2], ['{"loss":[1,2,3]}', '{"x":["a b","c"]}'])
    assert batch.metric_lines.chunks.columns() == ChunkColumns(
        [0, 1, 2], ["loss", "x"], ["1,2,3", '"a b","c"'])
    assert [batch.metric_lines.chunks.steps_of(k) for k in (0, 1)] == [[1, 2, 3], [3, 4]]
    assert batch.metric_lines.seqs == [1, 2, 3]  # the batch-metrics report (4) is decoded
    every = read_events(path, 0)
    assert [(e.type, {k: v for k, v in e.body.items() if k != "time"}) for e in every] == emitted
    assert [e.seq for e in every] == [1, 1, 1, 2, 3, 3, 4, 5]


@pytest.mark.parametrize("line, reports", [
    # A comma or bracket in a string: the text cannot count the values, so the line is decoded.
    ('"steps":[1,2],"columns":{"x":["a,b","]"]}', [(1, {"x": "a,b"}), (2, {"x": "]"})]),
    ('"steps":[1,2],"columns":{"x":[{"y":1},1]}', [(1, {"x": {"y": 1}}), (2, {"x": 1})]),
    # Steps and values that differ in number: skipped, and said so.
    ('"steps":[1,2,3],"columns":{"x":[1,2,3],"y":[1,2]}', []),
    ('"steps":[1,true],"columns":{"x":[1,2]}', []),
])
def test_a_chunk_line_the_pattern_cannot_take_is_decoded_or_skipped(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, line: str,
        reports: list[tuple[int, dict[str, Any]]]) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"seq":1,"type":"metrics","time":1.5,"group":"training",' + line + "}\n")
    batch = read_event_batch(path, 0)
    assert batch.metric_lines.seqs == []
    assert [(e.body["steps_completed"], e.body["metrics"]) for e in batch.others] == reports
    assert ("steps and values differ" in caplog.text) == (not reports)
    assert batch.end_offset == path.stat().st_size


def test_a_chunk_of_plain_values_is_signed_and_read_as_written(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    w = EventWriter(path)
    emitted: list[dict[str, Any]] = []
    for steps, metrics in (
            ((1, 2, 3), lambda s: {"loss": 1 / s, "ok": s == 2, "no": None, "inf": math.inf}),
            ((4, 5), lambda s: {"note": "a,b"}),  # not plain: decoded
            ((7, 6), lambda s: {"loss": s})):  # falling steps: checked value by value
        for step in steps:
            emitted.append({"group": "training", "steps_completed": step,
                            "metrics": metrics(step), "batch_metrics": None})
            w.emit("metrics", emitted[-1])
        w.flush()
    lines = path.read_text().splitlines()
    assert ['"crc":' in line for line in lines] == [True, False, False]
    batch = read_event_batch(path, 0)
    assert batch.metric_lines.seqs == [1, 3]
    assert batch.metric_lines.chunks.steps == ["1,2,3", "7,6"]
    assert [e.seq for e in batch.others] == [2, 2]
    every = read_events(path, 0)
    assert [{k: v for k, v in e.body.items() if k != "time"} for e in every] == [
        {**r, "metrics": {k: "Infinity" if v == math.inf else v for k, v in r["metrics"].items()}}
        for r in emitted]


@pytest.mark.parametrize("damage, decoded", [
    (lambda line: line.replace(b"0.5,", b"0.25,"), True),  # still JSON: decoded whole
    (lambda line: line.replace(b"0.5,", b"0.5.5,"), False),  # not JSON: skipped
    (lambda line: line.replace(b"3" * 16, b"\0" * 16), False),  # a block of zeros
    (lambda line: line.replace(b'"crc":', b'"crc":' + b"9" * 5000), False),  # no int() takes
])
def test_a_signed_line_whose_text_changed_is_not_read_as_written(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        damage: Callable[[bytes], bytes], decoded: bool) -> None:
    path = tmp_path / "events.jsonl"
    w = EventWriter(path)
    for step in (1, 2, 3):
        w.emit("metrics", {"group": "training", "steps_completed": step,
                           "metrics": {"loss": 1 / step}})
    w.close()
    line = path.read_bytes()
    assert b'"crc":' in line
    path.write_bytes(damage(line))
    batch = read_event_batch(path, 0)
    assert batch.metric_lines.seqs == []
    assert [e.body["metrics"]["loss"] for e in batch.others] == ([1.0, 0.25, 1 / 3] if decoded
                                                                 else [])
    assert ("a corrupt line" in caplog.text) == (not decoded)
    assert batch.end_offset == path.stat().st_size


def test_a_batch_reads_whole_lines_up_to_its_limit_and_the_rest_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log that grew while the daemon was stopped is read a bounded batch at a time: whole
    lines within the limit, or the one line that is longer than it; blank lines are passed."""
    path = tmp_path / "events.jsonl"
    long = json.dumps({"seq": 2, "type": "status", "text": "x" * 300})
    path.write_text('{"seq":1,"type":"a"}\n' + long + '\n\n\n{"seq":3,"type":"b"}\n')
    monkeypatch.setattr("hpcdet.rundir.exchange.BATCH_BYTES", 64)
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
