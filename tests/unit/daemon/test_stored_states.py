"""States reach the database and the journals as the plain strings hpcdet has always written,
and a database rebuilt from the journals and event logs holds the same strings."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from hpcdet.states import CheckpointState, ExperimentState, JobState, RunState, TrialState
from tests.unit.daemon.fake_local import FakeLocal, asha_config, create, drive, new_daemon

_TABLES = {"experiment": "id", "trial": "id", "run": "trial_id * 1000 + run_id",
           "checkpoint": "uuid"}


def _states(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(db)
    try:
        return {table: conn.execute(f"SELECT {key}, state, typeof(state) FROM {table} "
                                    f"ORDER BY {key}").fetchall()
                for table, key in _TABLES.items()}
    finally:
        conn.close()


def test_states_are_stored_and_journaled_as_their_names_and_survive_a_rebuild(
    tmp_path: Path,
) -> None:
    cluster = FakeLocal()
    daemon = new_daemon(tmp_path, cluster)
    daemon.reconcile()
    done = create(daemon, asha_config(max_trials=2, max_concurrent_trials=1,
                                      mode="aggressive"))
    killed = create(daemon, asha_config(max_trials=2))
    daemon.tick()
    daemon.commands.kill(killed)
    drive(daemon, cluster)
    db = daemon.paths.database()
    daemon.store.close()
    before = _states(db)

    assert [row[1:] for row in before["experiment"]] == [("COMPLETED", "text"),
                                                         ("CANCELED", "text")]
    assert {row[-1] for rows in before.values() for row in rows} == {"text"}
    assert {row[1] for row in before["trial"]} == {"COMPLETED", "CANCELED"}
    assert {row[1] for row in before["checkpoint"]} == {"COMPLETED", "DELETED"}
    assert {row[1] for row in before["run"]} <= {s.value for s in RunState}
    names = {s.value for t in (ExperimentState, TrialState, JobState, CheckpointState) for s in t}
    for exp_id in (done, killed):
        for line in daemon.paths.journal(exp_id).read_text().splitlines():
            entry = json.loads(line)
            for key in ("state", "trial_state", "job_state"):
                if key in entry:
                    assert entry[key] in names and f'"{key}":"{entry[key]}"' in line, line

    db.unlink()  # the next daemon rebuilds it from the run tree
    daemon = new_daemon(tmp_path, cluster)
    daemon.reconcile()
    daemon.store.close()
    assert _states(db) == before
