"""What each kind of journal entry does to the database, and that applying a journal again
changes nothing (the daemon re-applies entries after a crash and rebuilds from journals)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from hpcdet.records import stored_form
from hpcdet.store.entries import (
    ENTRY_CLASSES,
    KINDS,
    ExperimentMetaChanged,
    ExperimentQueueUpdated,
    RunEnded,
    decode,
    encode,
)
from hpcdet.store.journal_apply import APPLIERS, UnappliableEntry
from hpcdet.store.repository import Store
from tests.unit.store.store_support import Journaled


@pytest.fixture
def j(tmp_path: Path) -> Journaled:
    j = Journaled(tmp_path)
    j.experiment(1)
    j.trial(1, 1, request_id=0)
    j.trial(1, 2, request_id=1)
    return j


def _config(store: Store, exp_id: int) -> object:
    """The experiment's config as stored (these tests store configs no validation takes)."""
    with sqlite3.connect(store.path) as conn:
        [text] = conn.execute("SELECT config_json FROM experiment WHERE id = ?",
                              (exp_id,)).fetchone()
    return json.loads(text)


def _rows(store: Store) -> list[dict[str, object]]:
    """Every row of every table, as a comparable snapshot."""
    rows: list[dict[str, object]] = []
    for exp in store.experiments():
        rows.append({**stored_form(exp), "config": _config(store, exp.id)})
    trials = store.trials()
    rows += [stored_form(t) for t in trials]
    rows += [{**stored_form(r), "id": None} for r in store.runs()]
    rows += [stored_form(a) | {"id": None} for a in store.arrays(submitted=False)]
    rows += [{"searcher_event": e} for e in store.searcher_events(1)]
    return rows


def test_experiment_created_makes_the_row_from_the_entry(j: Journaled) -> None:
    exp = j.store.experiment(1)
    assert (exp.name, exp.state, exp.backend, exp.searcher, exp.position) == (
        "e1", "ACTIVE", "slurm", "single", 1.0)
    assert _config(j.store, 1)["searcher"]["metric"] == "loss"  # type: ignore[index]
    assert exp.journal_offset == j.journal(1).stat().st_size


def test_experiment_state_with_cascade_moves_the_idle_trials(j: Journaled) -> None:
    j.run(1, 1, job_id="101")  # trial 1 runs; trial 2 is queued
    j.record(1, "experiment_state", state="PAUSED", cascade=True)
    states = {t.id: t.state for t in j.store.trials(1)}
    assert states == {1: "ACTIVE", 2: "PAUSED"}
    j.record(1, "experiment_state", state="ACTIVE", cascade=True)
    assert {t.id: t.state for t in j.store.trials(1)} == {1: "ACTIVE", 2: "QUEUED"}


def test_a_final_experiment_state_sets_ended_and_without_cascade_leaves_trials(
        j: Journaled) -> None:
    j.record(1, "experiment_state", state="COMPLETED", time=123.0)
    assert j.store.experiment(1).ended == 123.0
    assert {t.state for t in j.store.trials(1)} == {"QUEUED"}


def test_experiment_failed_ends_everything_at_once(j: Journaled) -> None:
    j.run(1, 1, job_id="101")
    j.record(1, "experiment_failed", message="boom", time=5.0)
    exp = j.store.experiment(1)
    assert (exp.state, exp.error, exp.ended) == ("ERROR", "boom", 5.0)
    [run] = j.store.runs()
    assert (run.state, run.outcome) == ("CANCELED", "the experiment failed")
    assert {(t.state, t.end_reason) for t in j.store.trials(1)} == {
        ("CANCELED", "the experiment failed: boom")}


def test_a_queue_update_to_another_pool_drops_the_partition(tmp_path: Path) -> None:
    j = Journaled(tmp_path)
    j.experiment(1, slurm={"partition": "debug"})
    j.record(1, "experiment_queue", resource_pool="batch", priority=10, position=0.5)
    exp = j.store.experiment(1)
    config = _config(j.store, 1)
    assert isinstance(config, dict)
    assert (exp.resource_pool, exp.priority, exp.position) == ("batch", 10, 0.5)
    assert config["resources"] == {"resource_pool": "batch", "priority": 10}
    assert "partition" not in config["slurm"]


def test_experiment_error_and_config(j: Journaled) -> None:
    j.record(1, "experiment_state", state="COMPLETED", time=9.0)
    j.record(1, "experiment_error", message="metric missing")
    j.record(1, "experiment_config", config={"name": "y"})
    exp = j.store.experiment(1)
    # a new config (set gc-policy on a finished experiment) leaves it ended...
    assert (exp.error, _config(j.store, 1), exp.ended) == (
        "metric missing", {"name": "y"}, 9.0)
    # ...running again (continue) does not
    j.record(1, "experiment_state", state="ACTIVE")
    assert j.store.experiment(1).ended is None


def test_searcher_decisions_change_trials_and_count_as_done(j: Journaled) -> None:
    j.record(1, "op_issued", request_id=0, length=10, op_index=0, action_index=0)
    j.record(1, "op_issued", request_id=0, length=10, op_index=0, action_index=1)  # again
    j.record(1, "trial_closed", request_id=0, action_index=2)
    j.record(1, "trial_stop", request_id=1, action_index=3)
    t1, t2 = j.store.trials(1)
    assert (t1.ops, t1.closed, t1.state) == ((10,), True, "QUEUED")
    # A trial stopped before it ran is done.
    assert (t2.stop_requested, t2.state, t2.end_reason) == (
        True, "COMPLETED", "stopped by the searcher before it ran")
    assert j.store.experiment(1).actions_done == 4
    j.record(1, "searcher_shutdown", failure=True, message="bad metric", action_index=4)
    exp = j.store.experiment(1)
    assert (exp.searcher_done, exp.error, exp.actions_done) == (True, "bad metric", 5)


def test_a_waiting_trial_is_promoted_by_an_op_and_completed_by_a_close(j: Journaled) -> None:
    j.record(1, "trial_state", trial_id=1, state="WAITING")
    j.record(1, "trial_state", trial_id=2, state="WAITING")
    j.record(1, "op_issued", request_id=0, length=30, op_index=0)
    j.record(1, "trial_closed", request_id=1, time=8.0)
    t1, t2 = j.store.trials(1)
    assert t1.state == "QUEUED"
    assert (t2.state, t2.ended) == ("COMPLETED", 8.0)


def test_searcher_event_records_progress_exits_and_completed_ops(j: Journaled) -> None:
    j.run(1, 1, job_id="101")
    event = {"kind": "op_completed", "request_id": 0, "length": 10, "metric": 0.5}
    j.record(1, "searcher_event", event=event, progress=0.25, trial_id=1, run_id=1, seq=4)
    j.record(1, "searcher_event", event={"kind": "trial_exited", "request_id": 1,
                                         "reason": "ERRORED"}, exited_trial_id=2)
    [run] = j.store.runs()
    t1, t2 = j.store.trials(1)
    assert (run.searcher_seq, run.ops_decided, t1.ops_completed) == (4, 1, 1)
    assert t2.exit_reported
    assert j.store.experiment(1).progress == 0.25
    assert [e["kind"] for e in j.store.searcher_events(1)] == ["op_completed", "trial_exited"]


def test_a_run_from_submitting_to_ended(j: Journaled) -> None:
    j.record(1, "run_submitting", trial_id=1, run_id=1, first_op=2, time=3.0)
    [run] = j.store.runs()
    trial = j.store.trial(1)
    assert (run.state, run.first_op, run.submitted) == ("SUBMITTING", 2, 3.0)
    assert (trial.state, trial.run_id, trial.started) == ("ACTIVE", 1, 3.0)
    j.record(1, "run_submitted", trial_id=1, run_id=1, job_id="101")
    j.record(1, "run_submitted", trial_id=1, run_id=1, job_id="999")  # only from SUBMITTING
    assert (j.store.runs()[0].state, j.store.runs()[0].job_id) == ("PENDING", "101")
    j.record(1, "run_ended", trial_id=1, run_id=1, job_state="FAILED", exit_code=3,
             outcome="exit 3", trial_state="QUEUED", restarts=1, reason="restarting",
             time=9.0)
    [run] = j.store.runs()
    trial = j.store.trial(1)
    assert (run.state, run.exit_code, run.outcome, run.ended) == ("FAILED", 3, "exit 3", 9.0)
    assert (trial.state, trial.restarts, trial.end_reason, trial.ended) == (
        "QUEUED", 1, "restarting", None)


def test_trial_continued_makes_an_ended_trial_queued_again(j: Journaled) -> None:
    j.record(1, "trial_state", trial_id=1, state="ERROR", restarts=3, reason="x", time=2.0)
    assert j.store.trial(1).ended == 2.0
    j.record(1, "trial_continued", trial_id=1)
    t = j.store.trial(1)
    assert (t.state, t.restarts, t.ended, t.end_reason) == ("QUEUED", 0, None, "")


def test_a_deleted_checkpoint_unknown_yet_leaves_a_tombstone(j: Journaled) -> None:
    j.record(1, "checkpoint_deleted", uuid="c1", trial_id=1)
    ckpt = j.store.checkpoint("c1")
    assert (ckpt.state, ckpt.trial_id, ckpt.experiment_id) == ("DELETED", 1, 1)
    assert j.store.checkpoints(exp_id=1) == []  # only completed ones are listed


def test_arrays_submitting_submitted_abandoned(j: Journaled) -> None:
    j.record(1, "array_submitting", index=0, offset=0, count=4, throttle=2)
    j.record(1, "array_submitting", index=1, offset=4, count=4, throttle=2)
    assert j.store.arrays(1) == []  # no job id yet
    assert [a.index for a in j.store.arrays(1, submitted=False)] == [0, 1]
    j.record(1, "array_submitted", job_id="200", index=0, offset=0, count=4, throttle=2)
    j.record(1, "array_abandoned", index=1)
    j.record(1, "array_abandoned", index=0)  # has a job id: stays
    assert [(a.index, a.job_id, a.count) for a in j.store.arrays(1, submitted=False)] == [
        (0, "200", 4)]


def test_applying_every_journal_again_from_the_start_changes_nothing(j: Journaled) -> None:
    j.run(1, 1, job_id="101")
    j.record(1, "op_issued", request_id=0, length=10, op_index=0, action_index=0)
    j.record(1, "array_submitted", job_id="200", offset=0, count=2, throttle=0)
    j.record(1, "checkpoint_deleted", uuid="c1", trial_id=1)
    j.record(1, "experiment_queue", priority=5)
    before = _rows(j.store)
    rebuilt = Journaled(j.root / "again")
    rebuilt.journal(1).parent.mkdir(parents=True, exist_ok=True)
    rebuilt.journal(1).write_bytes(j.journal(1).read_bytes())
    assert rebuilt.apply(1) == 9
    assert rebuilt.apply(1) == 0  # everything before the stored offset is applied once
    assert _rows(rebuilt.store) == before


def test_damaged_skipped_and_unknown_lines_are_passed_over(j: Journaled) -> None:
    path = j.journal(1)
    with open(path, "a") as f:
        f.write("not json\n")
    j.write(1, "no_such_kind")
    skipped = j.write(1, "experiment_error", message="skipped")
    j.write(1, "experiment_error", message="applied")
    assert j.apply(1, skip={skipped}) == 1
    assert j.store.experiment(1).error == "applied"
    assert [why for _, why in j.reported] == ["an entry of unknown kind 'no_such_kind'"]
    assert j.store.experiment(1).journal_offset == path.stat().st_size


def test_an_entry_its_kind_cannot_use_applies_nothing_of_the_call(j: Journaled) -> None:
    offset = j.store.experiment(1).journal_offset
    j.write(1, "experiment_error", message="first")
    bad = j.write(1, "trial_state", state="ERROR")  # no trial_id
    with pytest.raises(UnappliableEntry) as raised:
        j.apply(1)
    assert raised.value.start == bad
    assert isinstance(raised.value.error, KeyError)
    exp = j.store.experiment(1)
    assert (exp.error, exp.journal_offset) == ("", offset)
    assert j.apply(1, skip={bad}) == 1
    assert j.store.experiment(1).error == "first"


def test_every_kind_the_journal_writes_reads_as_a_class_with_an_applier() -> None:
    assert set(KINDS) >= {
        "experiment_created", "experiment_state", "experiment_failed", "experiment_queue",
        "experiment_error", "experiment_advice", "experiment_config", "trial_created",
        "trial_continued",
        "trial_state", "op_issued", "trial_closed", "trial_stop", "searcher_shutdown",
        "searcher_event", "run_submitting", "run_submitted", "run_ended",
        "checkpoint_deleted", "array_submitting", "array_submitted", "array_abandoned",
    }
    assert set(APPLIERS) == set(ENTRY_CLASSES) == set(KINDS.values())
    assert all(KINDS[cls.kind] is cls for cls in ENTRY_CLASSES)


def test_a_line_reads_back_as_the_entry_written_and_a_damaged_one_does_not() -> None:
    entry = RunEnded(trial_id=3, run_id=2, job_state="FAILED", exit_code=None, trial_state="ERROR",
                     restarts=1, reason="exited with code 3")
    line = json.loads(json.dumps({"exp_id": 1, "time": 5.0, **encode(entry)}))
    assert "exit_code" not in line  # None: left out, as journals before the classes did
    assert decode(KINDS[line["kind"]], line) == entry
    with pytest.raises(KeyError, match="job_state"):
        decode(RunEnded, {k: v for k, v in line.items() if k != "job_state"})
    with pytest.raises(TypeError, match="run_ended.run_id"):
        decode(RunEnded, {**line, "run_id": "2"})
    with pytest.raises(TypeError):
        decode(ExperimentMetaChanged, {"archived": 1})
    assert decode(ExperimentQueueUpdated, {"weight": 2}) == ExperimentQueueUpdated(weight=2)
