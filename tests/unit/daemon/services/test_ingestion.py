"""Ingestion: trial events into the store once and on to the searcher; trial ends reported to the
searcher once."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcdet.daemon.ingestion import Ingestion
from hpcdet.store.entries import TrialStateChanged
from tests.unit.daemon.services.support import World

ADAPTIVE = {"name": "adaptive_asha", "metric": "loss", "time_metric": "batches", "max_time": 8,
            "max_trials": 2, "max_rungs": 2, "divisor": 2}


def _feed(w: World) -> Ingestion:
    return Ingestion(w.store, w.paths, w.configs, w.search, w.guard())


def _started(tmp_path: Path, searcher: dict[str, object]) -> World:
    w = World(tmp_path)
    w.experiment(1, searcher=searcher, hyperparameters={"lr": {"type": "const", "val": 1}})
    exp = w.store.experiment(1)
    w.search.start(exp, w.configs.get(exp))
    return w


def test_validations_reach_the_searcher_once(tmp_path: Path) -> None:
    w = _started(tmp_path, ADAPTIVE)
    trial = w.store.trials(1)[0]
    run_dir = w.run(1, trial.id, job_id="101")
    w.report(run_dir, ("metrics", {"group": "validation", "steps_completed": 4,
                                   "metrics": {"loss": 0.5, "batches": 4}}))
    feed = _feed(w)
    feed.ingest(w.store.runs()[0])
    feed.ingest(w.store.runs()[0])
    fed = [e for e in w.store.searcher_events(1) if e["kind"] == "validation"]
    assert len(fed) == 1 and fed[0]["metrics"] == {"loss": 0.5, "batches": 4}
    assert w.store.trial(trial.id).best_validation == 0.5
    assert w.store.runs()[0].searcher_seq == 1


def test_one_runs_bad_event_fails_only_its_experiment_and_the_others_are_stored(
    tmp_path: Path,
) -> None:
    """A tick stores every grown log in one transaction; an event the store cannot apply
    (a checkpoint without its uuid) rolls that back, and each run is stored alone instead."""
    w = World(tmp_path)
    for exp_id in (1, 2):
        w.experiment(exp_id, searcher={"name": "single", "metric": "loss", "max_length": 1})
        w.trial(exp_id, exp_id)
        training = ("metrics", {"group": "training", "steps_completed": 1,
                                "metrics": {"loss": 0.5}})
        bad = ("checkpoint", {"steps_completed": 1})
        w.report(w.run(exp_id, exp_id, job_id=str(100 + exp_id)),
                 *([training, bad] if exp_id == 1 else [training]))
    _feed(w).ingest_all(w.store.live_runs())
    assert w.store.experiment(1).state != "ACTIVE" and "uuid" in w.store.experiment(1).error
    assert w.store.experiment(2).state == "ACTIVE"
    assert [m.steps_completed for m in w.store.metrics(2)] == [1]
    assert w.store.runs([2])[0].event_seq == 1


def test_a_trial_that_ended_is_reported_to_the_searcher_once(tmp_path: Path) -> None:
    w = _started(tmp_path, {"name": "single", "metric": "loss", "max_length": 1})
    [trial] = w.store.trials(1)
    w.journal.record(1, TrialStateChanged(trial_id=trial.id, state="ERROR", reason="x"))
    feed = _feed(w)
    feed.report_exits()
    feed.report_exits()
    exits = [e for e in w.store.searcher_events(1) if e["kind"] == "exited"]
    assert [e["reason"] for e in exits] == ["errored"]
    assert w.store.trial(trial.id).exit_reported


def test_a_sweep_reads_a_batch_a_run_and_a_runs_end_reads_all_of_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log that grew while the daemon was stopped is read a bounded batch at a time: a
    sweep takes one a run (the next sweep goes on), a run's end or a rebuild all of them, in
    order, each validation fed to the searcher once."""
    monkeypatch.setattr("hpcdet.rundir.events.BATCH_BYTES", 200)
    w = _started(tmp_path, ADAPTIVE)
    trial = w.store.trials(1)[0]
    w.report(w.run(1, trial.id, job_id="101"), *[
        ("metrics", {"group": "validation", "steps_completed": step,
                     "metrics": {"loss": 1 / step, "batches": step}}) for step in range(1, 7)])
    feed = _feed(w)
    feed.ingest_all(w.store.live_runs())
    assert 0 < len(w.store.metrics(trial.id)) < 6
    feed.ingest(w.store.runs()[0])
    assert [m.steps_completed for m in w.store.metrics(trial.id)] == [1, 2, 3, 4, 5, 6]
    fed = [e["metrics"]["batches"] for e in w.store.searcher_events(1)
           if e["kind"] == "validation"]
    assert fed == [1, 2, 3, 4, 5, 6]
    assert w.store.trial(trial.id).best_validation == 1 / 6


def _unreadable(path: Path) -> None:
    """Make ``path`` raise an I/O error for every reader, root included (the tests run as
    root, whom file modes do not stop): a symbolic link to itself (ELOOP)."""
    path.unlink(missing_ok=True)
    path.symlink_to(path.name)


def test_an_unreadable_event_log_is_its_runs_fault_and_the_others_are_stored(
    tmp_path: Path,
) -> None:
    w = World(tmp_path)
    training = ("metrics", {"group": "training", "steps_completed": 1, "metrics": {"loss": 0.5}})
    for exp_id in (1, 2):
        w.experiment(exp_id, searcher={"name": "single", "metric": "loss", "max_length": 1})
        w.trial(exp_id, exp_id)
        w.report(w.run(exp_id, exp_id, job_id=str(100 + exp_id)), training)
    _unreadable(w.paths.run(1, 1, 1) / "events.jsonl")
    feed = _feed(w)
    feed.guard.new_round()
    feed.ingest_all(w.store.live_runs())  # raised ELOOP to the loop before
    assert [r.event_seq for r in w.store.runs()] == [0, 1]
    [fault] = feed.guard.current_faults()
    assert (fault.experiment_id, fault.step, fault.run) == (1, "reading an event log", (1, 1))
    assert fault.path.endswith("exp-1/trials/1/run-1/events.jsonl")
    assert "Too many levels of symbolic links" in fault.error
    assert {e.state for e in w.store.experiments()} == {"ACTIVE"}
