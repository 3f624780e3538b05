"""Every connection of the store is held to the oldest SQLite's limit of 999 bound variables
(RHEL 8 has 3.26): what binds more ids than that binds them in parts."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from hpcdet.store.reads import Reads
from tests.unit.store.store_support import LOSS_SEARCHER, Journaled, one_run, write_events

TRIALS = 1_200  # more ids than one statement may bind


def experiment_of_many_trials(root: Path) -> Journaled:
    """An experiment of TRIALS trials, each with a submitted run."""
    j = Journaled(root)
    j.experiment(1)
    j.write_all(1, [entry for t in range(1, TRIALS + 1) for entry in (
        ("trial_created", {"trial_id": t, "hparams": {"lr": 0.1}, "trial_seed": 7,
                           "request_id": t - 1}),
        ("run_submitting", {"trial_id": t, "run_id": 1}),
        ("run_submitted", {"trial_id": t, "run_id": 1, "job_id": str(1000 + t)}))])
    j.apply(1)
    return j


def test_a_statement_of_more_than_999_variables_fails_here_as_on_old_sqlite(
        tmp_path: Path) -> None:
    store = one_run(tmp_path).store
    query, values = f"SELECT {','.join('?' * 1000)}", tuple(range(1000))
    with store.engine.connect() as conn, pytest.raises(OperationalError,
                                                        match="too many SQL variables"):
        conn.exec_driver_sql(query, values)
    with Reads(store.path) as reads, pytest.raises(sqlite3.OperationalError,
                                                   match="too many SQL variables"):
        reads._conn.execute(query, values)


def test_more_runs_than_variables_are_stored_read_and_discarded_in_parts(
        tmp_path: Path) -> None:
    many = experiment_of_many_trials(tmp_path / "store")
    logs = []
    for t in range(1, TRIALS + 1):
        path = tmp_path / "runs" / f"{t}.jsonl"
        path.parent.mkdir(exist_ok=True)
        write_events(path, *[("metrics", {"group": "training", "steps_completed": s,
                                          "metrics": {"loss": 1 / s}}) for s in (1, 2)],
                     ("metrics", {"group": "validation", "steps_completed": 2,
                                  "metrics": {"loss": t / 10}}), one_flush=True)
        logs.append((t, 1, path, LOSS_SEARCHER))
    many.store.ingest_runs(logs)

    ids = list(range(TRIALS, 0, -1))  # in any order, as callers give them
    trials = many.store.trials(ids=ids)
    assert [t.id for t in trials] == list(range(1, TRIALS + 1))
    assert [t.best_validation for t in trials] == [t / 10 for t in range(1, TRIALS + 1)]
    assert [(r.trial_id, r.event_seq) for r in many.store.runs(ids)] == [
        (t, 2) for t in range(1, TRIALS + 1)]
    assert [r.job_id for r in many.store.current_runs(trials)] == [
        str(1000 + t) for t in range(1, TRIALS + 1)]
    assert many.store.metric_names(ids) == {"training": ["loss"], "validation": ["loss"]}
    assert many.store.metric_series(ids, "validation", "loss", 10) == [
        (t, 2, t / 10) for t in range(1, TRIALS + 1)]
    assert len(many.store.experiment_metrics(1, "training")) == 2 * TRIALS
    many.store.discard_experiment(1)
    assert many.store.trials() == [] and many.store.runs() == []
