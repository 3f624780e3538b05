"""The curves the web UI plots: ``Store.metric_series`` thins a trial's reports of a group to
every k-th from the first plus the last, through the per-group ``ordinal`` that ingest
assigns; ``Store.metric_names`` lists the names of each group."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcdet.store.ingest import BestOf
from tests.unit.store.store_support import Journaled, write_events

LOSS = BestOf("loss", smaller_is_better=True)


@pytest.fixture
def j(tmp_path: Path) -> Journaled:
    j = Journaled(tmp_path)
    j.experiment(1)
    for trial in (1, 2):
        j.trial(1, trial)
        j.run(1, trial, job_id=f"10{trial}")
    return j


def _report(group: str, steps: int, **values: object) -> tuple[str, dict[str, object]]:
    return ("metrics", {"group": group, "steps_completed": steps, "metrics": values})


def test_ordinals_count_each_group_apart_and_survive_a_replaced_step(
        j: Journaled, tmp_path: Path) -> None:
    events = tmp_path / "a.jsonl"
    write_events(events, _report("training", 1, loss=1.0), _report("validation", 1, v=9.0),
                 _report("training", 2, loss=0.5), _report("training", 2, acc=0.1))
    j.store.ingest_events(1, 1, events, LOSS)
    j.run(1, 1, run_id=2, job_id="103")
    again = tmp_path / "b.jsonl"
    write_events(again, _report("training", 2, loss=0.4), _report("training", 3, loss=0.3))
    j.store.ingest_events(1, 2, again, LOSS)
    got = [(m.group, m.steps_completed, m.ordinal) for m in j.store.metrics(1)]
    assert sorted(got) == [("training", 1, 0), ("training", 2, 1), ("training", 3, 2),
                           ("validation", 1, 0)]


def test_a_long_curve_is_every_kth_report_and_the_last(j: Journaled, tmp_path: Path) -> None:
    events = tmp_path / "a.jsonl"
    write_events(events, *[_report("training", s, loss=1.0 / s) for s in range(1, 1001)],
                 _report("training", 1001, loss="nan as text"))
    j.store.ingest_events(1, 1, events, LOSS)
    short = tmp_path / "b.jsonl"
    write_events(short, *[_report("training", s, loss=float(s)) for s in (10, 20, 30)])
    j.store.ingest_events(2, 1, short, LOSS)

    series = j.store.metric_series([1, 2], "training", "loss", points=100)
    first = [(x, v) for t, x, v in series if t == 1]
    # 1001 reports, at most 100 points: every 11th (ordinals 0, 11, ...) and the last.
    assert [x for x, _ in first] == [*range(1, 1001, 11), 1001]
    assert first[1] == (12, 1.0 / 12) and first[-1] == (1001, None)
    assert [(x, v) for t, x, v in series if t == 2] == [(10, 10.0), (20, 20.0), (30, 30.0)]
    assert j.store.metric_series([1], "validation", "loss", 100) == []
    assert j.store.metric_series([], "training", "loss", 100) == []


def test_metric_names_per_group(j: Journaled, tmp_path: Path) -> None:
    events = tmp_path / "a.jsonl"
    write_events(events, _report("training", 1, loss=1.0), _report("training", 2, loss=0.5),
                 _report("training", 3, loss=0.4, lr=0.1), _report("validation", 3, acc=0.5))
    j.store.ingest_events(1, 1, events, LOSS)
    other = tmp_path / "b.jsonl"
    write_events(other, _report("inference", 1, latency=3.0))
    j.store.ingest_events(2, 1, other, LOSS)
    assert j.store.metric_names([1, 2]) == {"training": ["loss", "lr"], "validation": ["acc"],
                                       "inference": ["latency"]}
