"""Rows of a real hpcdet database, put in bulk for the benchmarks that need a big store (the
daemon would take hours to make them one report at a time). The schema is the store's own:
``Store(path)`` creates it."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy.engine import Connection

from hpcdet.config.experiment import ExperimentConfig


def config(name: str, searcher: dict[str, Any]) -> dict[str, Any]:
    """A validated experiment config, as the daemon stores it."""
    return ExperimentConfig.from_dict({
        "name": name, "entrypoint": "python3 train.py",
        "hyperparameters": {"lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1},
                            "layers": {"type": "int", "minval": 1, "maxval": 8}},
        "searcher": searcher}).to_dict()


def experiment(conn: Connection, exp_id: int, name: str, cfg: dict[str, Any],
               state: str = "COMPLETED") -> None:
    conn.exec_driver_sql(
        "INSERT INTO experiment (id, name, state, config_json, description, labels_json, "
        "archived, resource_pool, weight, position, backend, searcher, created, "
        "journal_offset, progress, actions_done, searcher_done, error, request_id) VALUES "
        "(?, ?, ?, ?, '', '[]', 0, '', 1.0, ?, 'local', ?, ?, 0, 1.0, 0, 0, '', '')",
        (exp_id, name, state, json.dumps(cfg), exp_id, cfg["searcher"]["name"], time.time()))


def trials(conn: Connection, exp_id: int, rows: list[tuple[int, dict[str, Any], int, float]],
           state: str = "COMPLETED") -> None:
    """Trials of (id, hyperparameters, steps completed, best validation)."""
    conn.exec_driver_sql(
        "INSERT INTO trial (id, experiment_id, request_id, ops_json, ops_completed, "
        "closed, stop_requested, early_exit, exit_reported, state, hparams_json, "
        "trial_seed, restarts, run_id, steps_completed, progress, status, "
        "metadata_json, alerts_json, best_validation, end_reason) VALUES "
        "(?, ?, ?, '[]', 0, 1, 0, '', 1, ?, ?, 0, 0, 1, ?, 1.0, '', '{}', '[]', ?, '')",
        [(t, exp_id, i, state, json.dumps(hp), steps, best)
         for i, (t, hp, steps, best) in enumerate(rows)])


def metrics(conn: Connection,
            rows: list[tuple[int, int, str, list[int], int, list[dict[str, Any]]]]) -> None:
    """Rows of (trial, seq, group, steps completed, first ordinal, metrics) as the daemon
    stores them: a report, or a chunk of the reports of one flush."""
    now = time.time()
    conn.exec_driver_sql(
        'INSERT INTO metric (trial_id, run_id, seq, "group", steps_completed, last_step, '
        "ordinal, reports, metrics_json, steps_json, times_json, batch_metrics_json, "
        "reported) VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?, '', '', ?)",
        [(t, seq, g, min(x), max(x), o, len(x), _compact(m[0] if len(m) == 1 else {
            name: [metrics[name] for metrics in m] for name in m[0]}),
          _compact(x) if len(x) > 1 else "", now) for t, seq, g, x, o, m in rows])


def _compact(value: Any) -> str:
    """JSON as the trial writes it, which the store keeps (a chunk's columns are found by
    their brackets)."""
    return json.dumps(value, separators=(",", ":"))
