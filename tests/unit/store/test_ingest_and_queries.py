"""Trial events into the database exactly once (``Store.ingest_events``), the daemon's other
writes, and what the read queries return."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hpcdet.states import RunState
from hpcdet.store.ingest import BestOf
from hpcdet.store.repository import Store
from tests.unit.store.store_support import Journaled, one_run, write_events

LOSS = BestOf("loss", smaller_is_better=True)


@pytest.fixture
def j(tmp_path: Path) -> Journaled:
    return one_run(tmp_path)


def _metrics(events: Path, steps: int, **values: object) -> tuple[str, dict[str, object]]:
    return ("metrics", {"group": "validation", "steps_completed": steps, "metrics": values})


def test_events_are_stored_once_and_a_torn_last_line_waits(j: Journaled, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    write_events(events, _metrics(events, 1, loss=0.5), ("progress", {"progress": 0.5}))
    whole = events.stat().st_size
    with open(events, "a") as f:
        f.write('{"seq": 3, "type": "progress", "pro')  # a writer killed mid-line
    new = j.store.ingest_events(1, 1, events, LOSS)
    assert ([e.seq for e in new.events], new.first_seq, new.last_seq) == ([1, 2], 1, 2)
    again = j.store.ingest_events(1, 1, events, LOSS)
    assert (again.events, again.last_seq, again.end_offset) == ([], None, whole)
    [run] = j.store.runs()
    assert (run.event_seq, run.event_offset) == (2, whole)
    assert [m.steps_completed for m in j.store.metrics(1)] == [1]
    assert j.store.trial(1).progress == 0.5


def test_no_event_log_yet_is_nothing_to_ingest(j: Journaled, tmp_path: Path) -> None:
    assert j.store.ingest_events(1, 1, tmp_path / "none.jsonl", LOSS).last_seq is None


def test_reports_of_one_step_merge_and_a_later_run_replaces_them(
        j: Journaled, tmp_path: Path) -> None:
    first = tmp_path / "run1.jsonl"
    write_events(first, _metrics(first, 5, loss=0.5), _metrics(first, 5, acc=0.9))
    j.store.ingest_events(1, 1, first, LOSS)
    [m] = j.store.metrics(1, "validation")
    assert json.loads(m.metrics_json) == {"loss": 0.5, "acc": 0.9}
    j.run(1, 1, run_id=2, job_id="102")
    second = tmp_path / "run2.jsonl"
    write_events(second, _metrics(second, 5, loss=0.25))
    j.store.ingest_events(1, 2, second, LOSS)
    [m] = j.store.metrics(1, "validation")
    assert (json.loads(m.metrics_json), m.run_id) == ({"loss": 0.25}, 2)


def test_what_a_failed_ingest_wrote_is_not_remembered(j: Journaled, tmp_path: Path) -> None:
    # Each trial's last ordinal and highest step are kept between ingests; a transaction that
    # fails must leave them as committed, or the rows it would have stored are skipped.
    j.trial(1, 2)
    j.run(1, 2)
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    write_events(good, _metrics(good, 1, loss=0.5))
    j.store.ingest_events(1, 1, good, LOSS)
    write_events(good, _metrics(good, 2, loss=0.4), _metrics(good, 3, loss=0.3))
    write_events(bad, ("checkpoint", {"no uuid": True}))
    with pytest.raises(KeyError):
        j.store.ingest_runs([(1, 1, good, LOSS), (2, 1, bad, LOSS)])
    j.store.ingest_events(1, 1, good, LOSS)
    assert [(m.steps_completed, m.ordinal) for m in j.store.metrics(1)] == [(1, 0), (2, 1),
                                                                          (3, 2)]


@pytest.mark.parametrize(("smaller", "best"), [(True, 0.2), (False, 0.9)])
def test_best_validation_follows_the_searcher_metric_and_its_direction(
        j: Journaled, tmp_path: Path, smaller: bool, best: float) -> None:
    events = tmp_path / "events.jsonl"
    write_events(events, _metrics(events, 1, loss=0.5), _metrics(events, 2, loss=0.9),
                 _metrics(events, 3, loss=0.2), _metrics(events, 4, loss=math.nan),
                 _metrics(events, 5, loss="n/a"), _metrics(events, 6, loss=True),
                 _metrics(events, 7, acc=0.0))
    j.store.ingest_events(1, 1, events, BestOf("loss", smaller))
    assert j.store.trial(1).best_validation == best


def test_checkpoints_and_their_deletion(j: Journaled, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    write_events(events,
                 ("checkpoint", {"uuid": "c1", "steps_completed": 10,
                                 "metadata": {"k": 1}, "resources": {"a": 3}}),
                 ("checkpoint", {"uuid": "c2", "steps_completed": 20}))
    j.store.ingest_events(1, 1, events, LOSS)
    trial = j.store.trial(1)
    assert (trial.latest_checkpoint, trial.steps_completed) == ("c2", 20)
    assert [c.uuid for c in j.store.checkpoints(exp_id=1)] == ["c1", "c2"]
    assert j.store.checkpoint("c1").resources == {"a": 3}
    write_events(events, ("checkpoint_deleted", {"uuid": "c2"}))
    j.store.ingest_events(1, 1, events, LOSS)
    assert j.store.trial(1).latest_checkpoint is None
    assert [c.uuid for c in j.store.checkpoints(trial_id=1)] == ["c1"]


def test_a_checkpoint_the_journal_deleted_stays_deleted_when_its_event_comes(
        j: Journaled, tmp_path: Path) -> None:
    j.record(1, "checkpoint_deleted", uuid="c1", trial_id=1)  # a rebuild: journal first
    events = tmp_path / "events.jsonl"
    write_events(events, ("checkpoint", {"uuid": "c1", "steps_completed": 10}))
    j.store.ingest_events(1, 1, events, LOSS)
    ckpt = j.store.checkpoint("c1")
    assert (ckpt.state, ckpt.steps_completed) == ("DELETED", 10)
    assert j.store.trial(1).latest_checkpoint is None


def test_early_exit_and_preemption_acknowledged(j: Journaled, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    write_events(events, ("early_exit", {"reason": "INVALID_HP"}), ("preempt_ack", {}))
    j.store.ingest_events(1, 1, events, LOSS)
    assert j.store.trial(1).early_exit == "INVALID_HP"
    assert j.store.runs()[0].preempt_acked


def test_run_state_from_the_scheduler_only_while_submitted(j: Journaled) -> None:
    [run] = j.store.runs()
    j.store.set_run_states({run.job_id: (RunState.RUNNING, "")})
    assert (j.store.runs()[0].state, j.store.runs()[0].reason) == ("RUNNING", "")
    j.store.set_run_states({run.job_id: (RunState.PENDING, "Priority")})
    assert (j.store.runs()[0].state, j.store.runs()[0].reason) == ("PENDING", "Priority")
    j.record(1, "run_ended", trial_id=1, run_id=1, job_state="COMPLETED", trial_state="COMPLETED",
             restarts=0)
    j.store.set_run_states({run.job_id: (RunState.PENDING, "Priority")})
    assert j.store.runs()[0].state == "COMPLETED"
    assert j.store.runs(live_only=True) == []


def test_discard_experiment_removes_its_rows(j: Journaled) -> None:
    j.experiment(2)
    j.record(1, "searcher_event", event={"kind": "initialize"})
    j.store.discard_experiment(1)
    assert [e.id for e in j.store.experiments()] == [2]
    assert j.store.trials() == []
    assert j.store.searcher_events(1) == []


def test_ids_runs_and_filters(j: Journaled) -> None:
    j.experiment(3)
    j.trial(3, 9, request_id=4)
    j.record(1, "experiment_state", state="COMPLETED")
    assert j.store.max_ids() == (3, 9)
    assert Store(j.root / "empty.db").max_ids() == (0, 0)
    assert [e.id for e in j.store.experiments(unfinished=True)] == [3]
    assert j.store.requests_created(3) == 5
    assert j.store.requests_created(2) == 0
    assert [t.id for t in j.store.trials(state="QUEUED")] == [9]  # type: ignore[arg-type]
    assert j.store.run(1, 1) is not None and j.store.run(1, 2) is None
