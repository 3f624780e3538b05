"""Metric lines and chunks written and read (hpcdet.rundir.metric_codec)."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any, Callable

import pytest

from hpcdet.rundir.event_writer import EventWriter
from hpcdet.rundir.events import read_event_batch, read_events
from hpcdet.rundir.metric_codec import (
    ChunkColumns,
    Chunks,
    column_names,
    decode_steps,
    encode_lines,
    encode_steps,
    join_columns,
    json_member,
    metric_values,
    report_texts,
    sql_step_at,
    sql_value_at,
)


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


# Lines hpcdet's writer made before the codec had a module of its own (main at 5616652, from
# ``_lines`` of the reports in MAIN_REPORTS flushed together at time 1700000000.5): the
# format on disk of runs that go on after an upgrade.
MAIN_LINES = [
    '{"seq":1,"type":"metrics","crc":3845894947,"time":1700000000.5,"group":"training",'
    '"steps":[1,2,3],"columns":{"loss":[1.0,0.5,0.3333333333333333],"acc":[0.1,0.2,0.3]}}',
    '{"seq":2,"type":"metrics","time":1700000000.5,"group":"training","steps":[5,4],'
    '"columns":{"loss":["x y","x y"],"n":[null,null],"ok":[true,true]}}',
    '{"seq":3,"type":"metrics","time":1700000000.5,"group":"validation","steps_completed":3,'
    '"metrics":{"loss":0.25}}',
    '{"seq":4,"type":"metrics","crc":1264800989,"time":1700000000.5,"group":"training",'
    '"steps":[6,7],"columns":{"loss":["NaN","Infinity"]}}',
]
MAIN_REPORTS: list[tuple[str, dict[str, Any]]] = [
    *(("metrics", {"group": "training", "steps_completed": s,
                   "metrics": {"loss": 1 / s, "acc": s / 10}}) for s in (1, 2, 3)),
    *(("metrics", {"group": "training", "steps_completed": s,
                   "metrics": {"loss": "x y", "n": None, "ok": True}}) for s in (5, 4)),
    ("metrics", {"group": "validation", "steps_completed": 3, "metrics": {"loss": 0.25}}),
    *(("metrics", {"group": "training", "steps_completed": s,
                   "metrics": {"loss": math.nan if s == 6 else math.inf}}) for s in (6, 7)),
]
# What a reader gives of them: non-finite floats as Determined's strings.
MAIN_READ = [(s, {"group": "training", "steps_completed": s, "metrics": {"loss": v},
                  "batch_metrics": None}) for s, v in ((6, "NaN"), (7, "Infinity"))]


def test_the_encoder_writes_the_lines_hpcdet_wrote_before() -> None:
    assert encode_lines(MAIN_REPORTS, 1, 1700000000.5) == MAIN_LINES


def test_chunk_lines_of_an_older_hpcdet_read_back_as_their_reports(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(line + "\n" for line in MAIN_LINES))
    read = [(e.seq, {k: v for k, v in e.body.items() if k != "time"})
            for e in read_events(path, 0)]
    expected = [{**body, "batch_metrics": None} for _, body in MAIN_REPORTS]
    expected[5].pop("batch_metrics")  # a single report's line: as it was written
    expected[6:] = [body for _, body in MAIN_READ]
    assert [body for _, body in read] == expected
    assert [seq for seq, _ in read] == [1, 1, 1, 2, 2, 3, 4, 4]
    # What the store keeps of each chunk line (its columns and steps) decodes to its reports.
    chunks = read_event_batch(path, 0).metric_lines.chunks
    assert chunks.lines == [0, 1, 3]  # among the metric lines: the validation is line 2
    decoded = [(step, json.loads(text)) for k in range(len(chunks.lines))
               for step, text in zip(decode_steps(encode_steps(chunks.steps[k:k + 1])),
                                     report_texts(chunks.texts[k], chunks.reports[k]))]
    assert decoded == [(body["steps_completed"], body["metrics"]) for body in expected
                       if body["group"] == "training"]


def test_lines_joined_in_a_row_are_the_chunk_one_flush_would_have_written(
        tmp_path: Path) -> None:
    reports = [("metrics", {"group": "training", "steps_completed": s,
                            "metrics": {"loss": s / 4, "val.acc": -s, "a b": s % 2 == 0}})
               for s in range(1, 8)]
    apart = encode_lines(reports[:3], 1, 1.5) + encode_lines(reports[3:], 2, 1.5)
    path = tmp_path / "events.jsonl"
    path.write_text("".join(line + "\n" for line in apart))
    chunks = read_event_batch(path, 0).metric_lines.chunks
    [together] = encode_lines(reports, 1, 1.5)
    whole = json.loads(together)
    assert join_columns(chunks.columns(), 0, 2) == json.dumps(
        whole["columns"], separators=(",", ":"))
    assert json.loads(encode_steps(chunks.steps)) == whole["steps"]
    assert column_names(join_columns(chunks.columns(), 0, 2)) == ["loss", "val.acc", "a b"]


def test_the_json_paths_read_in_sql_the_values_the_decoder_gives() -> None:
    reports = [("metrics", {"group": "training", "steps_completed": s,
                            "metrics": {"loss": s / 4, "val.acc": None, "a b": s % 2 == 0,
                                        "note": "x y", "bad": math.nan}})
               for s in (3, 5, 9)]
    [line] = encode_lines(reports, 1, 1.5)
    chunk = json.loads(line)
    columns = json.dumps(chunk["columns"], separators=(",", ":"))
    steps = json.dumps(chunk["steps"])
    single = report_texts(columns, 3)[0]
    conn = sqlite3.connect(":memory:")
    for k, text in enumerate(report_texts(columns, 3)):
        step = conn.execute(f"SELECT {sql_step_at('?1', '?2')}", (steps, k)).fetchone()[0]
        assert step == chunk["steps"][k]
        for name, value in json.loads(text).items():
            in_sql = conn.execute(f"SELECT {sql_value_at('?1', '?2', '?3', '?4')}",
                                  (columns, json_member(name), 3, k)).fetchone()[0]
            assert in_sql == (int(value) if isinstance(value, bool) else value), name
    # A row of one report keeps its metrics object: the same path without the index.
    assert conn.execute(f"SELECT {sql_value_at('?1', '?2', '?3', '?4')}",
                        (single, json_member("loss"), 1, 0)).fetchone()[0] == 0.75
