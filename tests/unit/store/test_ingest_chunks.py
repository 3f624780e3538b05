"""Chunks: the training reports of one flush, written as one line and stored as one row, come
out of the store's readers one report at a time, and merge with or give way to other reports
as single reports do."""

from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest

from hpcdet.rundir.event_writer import EventWriter
from hpcdet.rundir.events import read_event_batch
from hpcdet.store.ingest import ROW_REPORTS, BestOf
from tests.unit.store.store_support import Journaled, one_run, write_events

LOSS = BestOf("loss", smaller_is_better=True)


@pytest.fixture
def j(tmp_path: Path) -> Journaled:
    return one_run(tmp_path)


def _report(group: str, steps: int, **values: Any) -> tuple[str, dict[str, Any]]:
    return ("metrics", {"group": group, "steps_completed": steps, "metrics": values,
                        "batch_metrics": None})


def _stored(j: Journaled, group: str | None = None) -> list[tuple[str, int, int, int, Any]]:
    return [(m.group, m.steps_completed, m.ordinal, m.run_id, json.loads(m.metrics_json))
            for m in j.store.metrics(1, group)]


def _rows(j: Journaled) -> list[tuple[str, int, int, int]]:
    """(group, lowest step, first ordinal, reports) of each row in the database."""
    with sqlite3.connect(j.store.path) as conn:
        return conn.execute('SELECT "group", steps_completed, ordinal, reports FROM metric '
                            'ORDER BY "group", ordinal').fetchall()


def test_a_flush_of_reports_is_one_row_and_reads_as_its_reports(
        j: Journaled, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    write_events(events, *(_report("training", s, loss=1 / s) for s in range(1, 6)),
                 _report("validation", 5, loss=0.1), _report("training", 6, loss=0.1),
                 _report("training", 7, loss=0.05), one_flush=True)
    assert len(events.read_text().splitlines()) == 3  # training 1-5, validation 5, training 6-7
    chunks = read_event_batch(events, 0).metric_lines.chunks
    assert dict(zip(chunks.lines, map(chunks.steps_of, range(2)))) == {
        0: [1, 2, 3, 4, 5], 2: [6, 7]}
    j.store.ingest_events(1, 1, events, LOSS)
    assert _rows(j) == [("training", 1, 0, 5), ("training", 6, 5, 2), ("validation", 5, 0, 1)]
    assert _stored(j, "training") == [("training", s, s - 1, 1, {"loss": 1 / s})
                                      for s in range(1, 6)] + [
        ("training", 6, 5, 1, {"loss": 0.1}), ("training", 7, 6, 1, {"loss": 0.05})]
    assert j.store.trial(1).best_validation == 0.1
    assert j.store.metric_names([1]) == {"training": ["loss"], "validation": ["loss"]}


def test_a_later_run_replaces_the_steps_of_a_chunk_and_keeps_their_order(
        j: Journaled, tmp_path: Path) -> None:
    first = tmp_path / "run1.jsonl"
    write_events(first, *(_report("training", s, loss=s) for s in range(1, 6)), one_flush=True)
    j.store.ingest_events(1, 1, first, LOSS)
    j.run(1, 1, run_id=2, job_id="102")
    second = tmp_path / "run2.jsonl"  # resumed from the checkpoint at step 3
    write_events(second, *(_report("training", s, loss=10 * s) for s in range(4, 8)),
                 one_flush=True)
    j.store.ingest_events(1, 2, second, LOSS)
    assert _stored(j) == [("training", s, s - 1, 1, {"loss": s}) for s in range(1, 4)] + [
        ("training", s, s - 1, 2, {"loss": 10 * s}) for s in range(4, 8)]
    # The chunk split where the new run's reports replaced its own; they came in one by one.
    assert [reports for *_, reports in _rows(j)] == [1] * 7
    series = j.store.metric_series([1], "training", "loss", points=100)
    assert series == [(1, s, s if s < 4 else 10 * s) for s in range(1, 8)]


def test_reports_of_one_step_in_one_chunk_merge(j: Journaled, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    write_events(events, _report("training", 1, loss=1.0), _report("training", 2, loss=0.5),
                 _report("training", 2, acc=0.9), one_flush=True)
    j.store.ingest_events(1, 1, events, LOSS)
    assert _stored(j) == [("training", 1, 0, 1, {"loss": 1.0}),
                          ("training", 2, 1, 1, {"loss": 0.5, "acc": 0.9})]


def _chunk(seq: int, time: float, steps: list[int], **columns: list[Any]) -> str:
    return json.dumps({"seq": seq, "type": "metrics", "time": time, "group": "training",
                       "steps": steps, "columns": columns}, separators=(",", ":"))


def test_the_lines_of_a_batch_make_one_row_and_keep_their_times(
        j: Journaled, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    big = list(range(9, 10 + ROW_REPORTS))
    events.write_text("\n".join([  # flushes of chunks, a report alone, other metrics
        _chunk(1, 1.5, [1, 2], loss=[1, 2], acc=["a", "b"]),
        _chunk(2, 2.5, [3, 4], loss=[3, 4], acc=["c", "d"]),
        '{"seq":3,"type":"metrics","time":3.5,"group":"training","steps_completed":5,'
        '"metrics":{"loss":5,"acc":"e"}}',
        _chunk(4, 4.5, [6, 7], loss=[6, 7], acc=["f", "g"]),
        _chunk(5, 5.5, [8], loss=[8]),  # other metrics: a row of its own
        _chunk(6, 6.5, big, loss=big),  # past a row's size
    ]) + "\n")
    j.store.ingest_events(1, 1, events, LOSS)
    assert _rows(j) == [("training", 1, 0, 4), ("training", 5, 4, 1), ("training", 6, 5, 2),
                        ("training", 8, 7, 1), ("training", 9, 8, ROW_REPORTS + 1)]
    reports = j.store.metrics(1)
    assert [(m.steps_completed, m.reported, m.seq, json.loads(m.metrics_json))
            for m in reports[:9]] == [
        (1, 1.5, 1, {"loss": 1, "acc": "a"}), (2, 1.5, 1, {"loss": 2, "acc": "b"}),
        (3, 2.5, 1, {"loss": 3, "acc": "c"}), (4, 2.5, 1, {"loss": 4, "acc": "d"}),
        (5, 3.5, 3, {"loss": 5, "acc": "e"}), (6, 4.5, 4, {"loss": 6, "acc": "f"}),
        (7, 4.5, 4, {"loss": 7, "acc": "g"}), (8, 5.5, 5, {"loss": 8}),
        (9, 6.5, 6, {"loss": 9})]
    assert len(reports) == ROW_REPORTS + 9
    assert j.store.metric_names([1]) == {"training": ["loss", "acc"]}
    # A later run splits the row it resumes into, each report with its time.
    j.run(1, 1, run_id=2, job_id="102")
    second = tmp_path / "run2.jsonl"
    write_events(second, _report("training", 4, loss=40))
    j.store.ingest_events(1, 2, second, LOSS)
    again = sorted(j.store.metrics(1), key=lambda m: m.ordinal)
    assert [(m.steps_completed, m.reported, m.run_id) for m in again[:3]] == [
        (1, 1.5, 1), (2, 1.5, 1), (3, 2.5, 1)]
    assert (again[3].steps_completed, again[3].run_id, again[3].ordinal) == (4, 2, 3)
    assert json.loads(again[3].metrics_json) == {"loss": 40} and again[3].reported > 6.5
    assert [(m.steps_completed, m.ordinal) for m in again[4:]] == [
        (s, s - 1) for s in range(5, 10 + ROW_REPORTS)]


def test_a_curve_is_thinned_across_chunks(j: Journaled, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    for first in range(1, 101, 10):  # ten flushes of ten reports, read in two batches
        write_events(events, *(_report("training", s, loss=s / 2, note="x") for s in
                               range(first, first + 10)), one_flush=True)
        if first == 41:
            j.store.ingest_events(1, 1, events, LOSS)
    j.store.ingest_events(1, 1, events, LOSS)
    assert _rows(j) == [("training", 1, 0, 50), ("training", 51, 50, 50)]
    every = j.store.metric_series([1], "training", "loss", points=1000)
    assert every == [(1, s, s / 2) for s in range(1, 101)]
    thinned = j.store.metric_series([1], "training", "loss", points=10)
    # every 10th report from the first (ordinal 0, 10, ..., 90), then the last
    assert thinned == [(1, s, s / 2) for s in [*range(1, 100, 10), 100]]
    assert j.store.metric_series([1], "training", "note", points=3)[0] == (1, 1, None)


def test_a_chunk_of_validations_reaches_the_feed_one_report_at_a_time(
        j: Journaled, tmp_path: Path) -> None:
    # The trial side never writes one, but a line that does must not hide them from the feed.
    events = tmp_path / "events.jsonl"
    events.write_text('{"seq":1,"type":"metrics","time":1.5,"group":"validation",'
                      '"steps":[1,2],"columns":{"loss":[0.5,0.25]}}\n')
    new = j.store.ingest_events(1, 1, events, LOSS)
    assert [(e.body["steps_completed"], e.body["metrics"]) for e in new.events] == [
        (1, {"loss": 0.5}), (2, {"loss": 0.25})]
    assert _stored(j) == [("validation", 1, 0, 1, {"loss": 0.5}),
                          ("validation", 2, 1, 1, {"loss": 0.25})]
    assert j.store.trial(1).best_validation == 0.25


@pytest.mark.parametrize("between", [False, True])  # a validation after each flush, or at the end
@pytest.mark.parametrize("flushes", [
    [[1, 2, 3], [4, 5], [6], [7, 8, 9]],  # steps that rise: found from each line's ends
    [[1, 2, 3], [3, 4, 5]],  # signed lines, a step again: each step parsed, step 3 merged
    [[1, 2, 3], [6, 5]],  # steps that fall: each step parsed
    [list(range(1, ROW_REPORTS)), list(range(ROW_REPORTS, ROW_REPORTS + 9))],
])
def test_signed_chunk_lines_are_stored_as_the_same_lines_unsigned(
        tmp_path: Path, flushes: list[list[int]], between: bool) -> None:
    signed, unsigned = tmp_path / "signed.jsonl", tmp_path / "unsigned.jsonl"
    writer = EventWriter(signed)
    lines: list[str] = []
    signs = []  # whether each line is signed: a chunk line whose steps rise
    losses = []  # of the validations
    for k, steps in enumerate(flushes):
        for step in steps:
            writer.emit(*_report("training", step, loss=1 / step))
        writer.flush()
        lines.append(_chunk(len(lines) + 1, 1.5, steps, loss=[1 / step for step in steps])
                     if len(steps) > 1 else
                     f'{{"seq":{len(lines) + 1},"type":"metrics","time":1.5,"group":"training",'
                     f'"steps_completed":{steps[0]},"metrics":{{"loss":{1 / steps[0]}}}}}')
        signs.append(len(steps) > 1 and steps == sorted(set(steps)))
        if between or k == len(flushes) - 1:
            losses.append(0.5 + abs(k - 1))  # the best neither the first nor the last
            writer.emit(*_report("validation", steps[-1], loss=losses[-1]))
            writer.flush()
            lines.append(f'{{"seq":{len(lines) + 1},"type":"metrics","time":1.5,'
                         f'"group":"validation","steps_completed":{steps[-1]},'
                         f'"metrics":{{"loss":{losses[-1]}}}}}')
            signs.append(False)
    writer.close()
    unsigned.write_text("\n".join(lines) + "\n")
    # A chunk line is signed if its steps rise; a lone report's line and a validation's not.
    assert ['"crc":' in line for line in signed.read_text().splitlines()] == signs
    stored = []
    for events in (signed, unsigned):
        j = one_run(tmp_path / events.stem)
        j.store.ingest_events(1, 1, events, LOSS)
        with sqlite3.connect(j.store.path) as conn:
            stored.append(conn.execute(
                'SELECT "group", steps_completed, last_step, ordinal, reports, steps_json, '
                "metrics_json FROM metric ORDER BY id").fetchall())
        stored.append(_stored(j))
        assert j.store.trial(1).best_validation == min(losses)
    assert stored[:2] == stored[2:]
    assert [step for group, step, *_ in stored[1] if group == "training"] == list(
        dict.fromkeys(step for steps in flushes for step in steps))



def test_a_forged_signed_line_fails_no_reader(j: Journaled, tmp_path: Path) -> None:
    """Signed lines whose columns have fewer or more values than steps (their CRCs made to
    match: a trial's forgery, not a filesystem's damage) are stored as written, joined into
    one row, and read back as the row's steps with the values in its columns' order, cut or
    filled with null: the forger spoils its own trial's reports, never a reader."""
    events = tmp_path / "events.jsonl"
    forged = [_chunk(0, 1.5, [1, 2, 3], loss=[0.5, 0.4], acc=[1, 2, 3, 4]),
              _chunk(1, 1.6, [4, 5], loss=[0.3, 0.2], acc=[5, 6])]
    head = '"type":"metrics",'
    events.write_text("".join(  # each signed as EventWriter signs: the CRC-32 of what follows
        line.replace(head, f'{head}"crc":{zlib.crc32(line.split(head)[1].encode())},') + "\n"
        for line in forged))
    assert read_event_batch(events, 0).metric_lines.chunks.rising  # taken as signed
    j.store.ingest_events(1, 1, events, LOSS)
    assert _rows(j) == [("training", 1, 0, 5)]
    assert [(step, metrics) for _, step, _, _, metrics in _stored(j)] == [
        (1, {"loss": 0.5, "acc": 1}), (2, {"loss": 0.4, "acc": 2}),
        (3, {"loss": 0.3, "acc": 3}), (4, {"loss": 0.2, "acc": 4}),
        (5, {"loss": None, "acc": 5})]
    assert j.store.metric_series([1], "training", "loss", 10) == [
        (1, 1, 0.5), (1, 2, 0.4), (1, 3, 0.3), (1, 4, 0.2), (1, 5, None)]
