"""The daemon's searcher survives a restart after any event: rebuilt from SQLite alone, it
carries out exactly the decisions of an uninterrupted run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpcdet.config import load_experiment_config
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.searching import SearchDriver
from hpcdet.paths import StatePaths
from hpcdet.search import Event, Searcher
from hpcdet.store.entries import ExperimentCreated
from hpcdet.store.repository import Store
from tests.support import EXAMPLES
from tests.unit.search.fake_cluster import FakeCluster

DECISIONS = ("trial_created", "op_issued", "trial_closed", "trial_stop", "searcher_shutdown")


def _decisions(paths: StatePaths) -> list[dict[str, Any]]:
    out = []
    for line in paths.journal(1).read_text().splitlines():
        entry = json.loads(line)
        if entry["kind"] in DECISIONS:
            entry.pop("time")
            entry.pop("part", None)  # its place in an append, which a restart splits
            out.append(entry)
    return out


def _daemon(root: Path) -> tuple[StatePaths, Store, Journal, SearchDriver]:
    paths = StatePaths(root)
    store = Store(root / "hpcdet.db")
    journal = Journal(paths, store)
    return paths, store, journal, SearchDriver(store, journal)


def _feed(root: Path, config: Any, events: list[Event], restart_at: int | None) -> StatePaths:
    paths, store, journal, driver = _daemon(root)
    journal.record(1, ExperimentCreated(name="e", config=config.to_dict(), backend="local",
                   searcher=config.searcher.name))
    for k, event in enumerate(events):
        if k == restart_at:
            store.close()  # the daemon dies; a new one opens the same database
            paths, store, journal, driver = _daemon(root)
            journal.replay_all()
            driver.carry_out(store.experiment(1), config)
        driver.feed(store.experiment(1), config, event, None)
    store.close()
    return paths


@pytest.mark.parametrize(
    ("example", "mode"), [("3_hpsearch.yaml", "ops"), ("3_hpsearch_v038.yaml", "validations")]
)
def test_restart_after_every_event(example: str, mode: str, tmp_path: Path) -> None:
    overrides = ["reproducibility.experiment_seed=7", "searcher.metric=loss"]
    config = load_experiment_config(EXAMPLES / example, overrides)
    searcher = Searcher(config.searcher, config.hyperparameters, config.experiment_seed)
    run = FakeCluster(searcher, seed=3, mode=mode).run()
    assert len(run.events) > 20
    expected = _decisions(_feed(tmp_path / "whole", config, run.events, None))
    assert any(d["kind"] == "searcher_shutdown" for d in expected)
    for k in range(1, len(run.events)):
        got = _decisions(_feed(tmp_path / f"restart-{k}", config, run.events, k))
        assert got == expected, f"restarted before event {k}"
