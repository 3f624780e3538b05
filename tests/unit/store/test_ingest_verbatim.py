"""Metric reports as the trial wrote them: a report of a new step is stored with its metrics
text taken verbatim from the event log, without a decode; merging and replacing come out as
they do for reports that had to be decoded, mixed in any order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpcdet.rundir.events import read_event_batch, read_events
from hpcdet.store.ingest import BestOf
from tests.unit.store.store_support import Journaled, one_run, write_events

LOSS = BestOf("loss", smaller_is_better=True)


@pytest.fixture
def j(tmp_path: Path) -> Journaled:
    return one_run(tmp_path)


def _report(group: str, steps: int, batches: Any = None, **values: Any
            ) -> tuple[str, dict[str, Any]]:
    return ("metrics", {"group": group, "steps_completed": steps, "metrics": values,
                        "batch_metrics": batches})


def _stored(j: Journaled) -> list[tuple[str, int, int, int, dict[str, Any], Any]]:
    return sorted((m.group, m.steps_completed, m.ordinal, m.run_id, json.loads(m.metrics_json),
                   json.loads(m.batch_metrics_json) if m.batch_metrics_json else None)
                  for m in j.store.metrics(1))


def test_a_report_of_a_new_step_keeps_the_text_the_trial_wrote(
        j: Journaled, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    write_events(events, _report("training", 1, loss=0.5, name="a b", ok=True, none=None),
                 ("progress", {"progress": 0.5}), _report("validation", 1, loss=1e-05))
    written = [json.loads(line) for line in events.read_text().splitlines()]
    assert len(read_event_batch(events, 0).metric_lines.seqs) == 2  # neither decoded
    j.store.ingest_events(1, 1, events, LOSS)
    by_group = {m.group: m.metrics_json for m in j.store.metrics(1)}
    assert by_group == {"training": '{"loss":0.5,"name":"a b","ok":true,"none":null}',
                        "validation": '{"loss":1e-05}'}
    assert json.loads(by_group["training"]) == written[0]["metrics"]
    assert (j.store.trial(1).best_validation, j.store.trial(1).progress) == (1e-05, 0.5)


# Reports that must be decoded: a nested value, a name not in plain ASCII, batch metrics.
DECODED = {"nested": {"deep": [1, 2]}}


@pytest.mark.parametrize("first_decoded", [False, True])
def test_reports_of_one_step_merge_whichever_way_each_was_read(
        j: Journaled, tmp_path: Path, first_decoded: bool) -> None:
    events = tmp_path / "events.jsonl"
    first = _report("training", 5, **DECODED) if first_decoded else _report("training", 5, a=1)
    second = _report("training", 5, a=1) if first_decoded else _report("training", 5, **DECODED)
    write_events(events, first, _report("training", 6, b=2), second,
                 _report("training", 6, batches=[{"x": 1}], é=3))
    lines = read_event_batch(events, 0).metric_lines
    assert len(lines.seqs) == 2
    j.store.ingest_events(1, 1, events, LOSS)
    assert _stored(j) == [("training", 5, 0, 1, {"a": 1, **DECODED}, None),
                          ("training", 6, 1, 1, {"b": 2, "é": 3}, [{"x": 1}])]


def test_a_later_run_replaces_steps_and_merges_into_them_over_batches(
        j: Journaled, tmp_path: Path) -> None:
    first = tmp_path / "run1.jsonl"
    write_events(first, _report("training", 1, loss=1.0), _report("training", 2, loss=0.9),
                 _report("validation", 2, loss=0.8))
    j.store.ingest_events(1, 1, first, LOSS)
    j.run(1, 1, run_id=2, job_id="102")
    second = tmp_path / "run2.jsonl"
    write_events(second, _report("training", 2, loss=0.7))
    j.store.ingest_events(1, 2, second, LOSS)
    write_events(second, _report("training", 2, acc=0.1), _report("training", 3, loss=0.6),
                 _report("validation", 3, loss=0.5, **DECODED))
    j.store.ingest_events(1, 2, second, LOSS)
    assert _stored(j) == [("training", 1, 0, 1, {"loss": 1.0}, None),
                          ("training", 2, 1, 2, {"loss": 0.7, "acc": 0.1}, None),
                          ("training", 3, 2, 2, {"loss": 0.6}, None),
                          ("validation", 2, 0, 1, {"loss": 0.8}, None),
                          ("validation", 3, 1, 2, {"loss": 0.5, **DECODED}, None)]
    assert j.store.trial(1).best_validation == 0.5
    [run1, run2] = j.store.runs()
    assert (run2.event_seq, run2.event_offset) == (4, second.stat().st_size)


def test_events_come_back_in_file_order_with_their_bodies(
        j: Journaled, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    write_events(events, _report("training", 1, loss=0.5), ("status", {"status": "x"}),
                 _report("training", 2, **DECODED), _report("validation", 2, loss=0.25))
    written = [json.loads(line) for line in events.read_text().splitlines()]
    new = j.store.ingest_events(1, 1, events, LOSS)
    # What the feed reads: every event but the training reports read by the pattern, which
    # are only stored (the one with DECODED metrics is read whole).
    assert [(e.seq, e.type) for e in new.events] == [(2, "status"), (3, "metrics"),
                                                     (4, "metrics")]
    assert (new.first_seq, new.last_seq) == (1, 4)
    assert [dict(e.body) for e in new.events] == [
        {k: v for k, v in w.items() if k not in ("seq", "type")} for w in written[1:]]
    every = read_events(events, 0)
    assert [(e.seq, e.type) for e in every] == [(1, "metrics"), (2, "status"), (3, "metrics"),
                                                (4, "metrics")]
    assert [e.body["group"] for e in every if e.type == "metrics"] == [
        "training", "training", "validation"]
    assert [dict(e.body) for e in every] == [
        {k: v for k, v in w.items() if k not in ("seq", "type")} for w in written]


_HEAD = '{"seq":2,"type":"metrics","time":1.5,"group":"training",'


@pytest.mark.parametrize("line", [
    # Numbers SQLite cannot store: 19 digits (the pattern takes 18), past 2**63, past the
    # 4,300 digits int() takes.
    '{"seq":9223372036854775808,"type":"metrics","time":1.5,"group":"training",'
    '"steps_completed":2,"metrics":{"loss":2}}',
    _HEAD + '"steps_completed":9223372036854775808,"metrics":{"loss":2}}',
    _HEAD + '"steps_completed":' + "9" * 5000 + ',"metrics":{"loss":2}}',
    _HEAD + '"steps":[2,9223372036854775808],"columns":{"loss":[2,3]}}',
    # A report without what storing it needs.
    _HEAD + '"metrics":{"loss":2}}',
    _HEAD + '"steps_completed":2,"metrics":[2]}',
    _HEAD + '"steps_completed":2.0,"metrics":{"loss":2}}',
    '{"seq":2,"type":"metrics","group":"training","steps_completed":2,"metrics":{"loss":2}}',
    '{"seq":2,"type":"metrics","time":1.5,"steps_completed":2,"metrics":{"loss":2}}',
], ids=["seq", "step", "step-5000-digits", "chunk-step", "no-step", "metrics-list",
        "float-step", "no-time", "no-group"])
def test_a_report_the_store_cannot_take_is_skipped_and_said_so(
        j: Journaled, tmp_path: Path, caplog: pytest.LogCaptureFixture, line: str) -> None:
    events = tmp_path / "events.jsonl"
    write_events(events, _report("training", 1, loss=1))
    start = events.stat().st_size
    with events.open("a") as f:
        f.write(line + "\n")
    write_events(events, _report("validation", 3, loss=3))
    batch = j.store.ingest_events(1, 1, events, LOSS)
    assert batch.end_offset == events.stat().st_size
    assert "skipped a" in caplog.text and f"{events} at byte offset {start}" in caplog.text
    assert _stored(j) == [("training", 1, 0, 1, {"loss": 1}, None),
                          ("validation", 3, 0, 1, {"loss": 3}, None)]
    assert j.store.trial(1).best_validation == 3


def test_a_report_of_a_negative_step_is_stored(j: Journaled, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    write_events(events, _report("training", -(2**63), loss=1), _report("training", 1, loss=2))
    j.store.ingest_events(1, 1, events, LOSS)
    assert _stored(j) == [("training", -(2**63), 0, 1, {"loss": 1}, None),
                          ("training", 1, 1, 1, {"loss": 2}, None)]
