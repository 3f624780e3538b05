"""Journals written by hpcdet before the journal's entries were typed (main at 5616652)
replay to the same database: ``golden/exp-*.jsonl`` and the tables they made, applied by that
hpcdet, ``golden/tables.json``.

Experiments 1 to 5 were journaled by a real daemon on the local backend (a failing trial with
restarts, checkpoint GC with metadata changes and a continue, an ASHA search with early stops,
a pause/activate with queue updates, a random search with a killed trial, cancelled); 7 by one
running a 0.37 ASHA search (trials WAITING, promoted and closed), as experiment 1, renumbered.
6 and 8 hold what the local backend never writes or a real run rarely times that way (job
arrays, a legacy ``experiment_priority``, ``experiment_failed``, a promotion and a stop of
trials without a job), written as that daemon wrote them. Every state rule of the appliers
changes these tables when broken. Regenerate the tables (only when the database's schema
changes on purpose, and with the hpcdet that wrote the journals) with
``python -m tests.unit.store.test_golden_journal``.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

from hpcdet.store.entries import KINDS
from tests.unit.store.store_support import Journaled

GOLDEN = Path(__file__).resolve().parent / "golden"
# The tables the journal's entries write (metrics come from the event logs, not the journal).
TABLES = ("experiment", "trial", "run", "checkpoint", "searcherevent", "arrayjob")


def _journals() -> list[tuple[int, Path]]:
    return sorted((int(p.stem.removeprefix("exp-")), p) for p in GOLDEN.glob("exp-*.jsonl"))


def replay(root: Path) -> tuple[dict[str, list[dict[str, Any]]], list[tuple[int, str]]]:
    """Every golden journal applied to a fresh database under ``root``: its tables' rows, and
    the entries skipped (with why)."""
    j = Journaled(root)
    for exp_id, path in _journals():
        shutil.copyfile(path, j.journal(exp_id))
        j.apply(exp_id)
    j.store.engine.dispose()
    with sqlite3.connect(root / "hpcdet.db") as db:
        db.row_factory = sqlite3.Row
        tables = {t: [dict(r) for r in db.execute(f"SELECT * FROM {t} ORDER BY rowid")]
                  for t in TABLES}
    return tables, j.reported


def test_golden_journals_replay_to_the_same_rows(tmp_path: Path) -> None:
    tables, skipped = replay(tmp_path)
    assert skipped == []
    golden = json.loads((GOLDEN / "tables.json").read_text())
    for table in TABLES:
        assert tables[table] == golden[table], table
    assert len(golden["experiment"]) == 8 and golden["arrayjob"] and golden["checkpoint"]


def test_golden_journals_hold_every_kind_hpcdet_wrote() -> None:
    kinds = {json.loads(line)["kind"] for _, path in _journals()
             for line in path.read_text().splitlines()}
    assert all(kind in KINDS for kind in kinds)  # each reads as its class
    assert kinds == {
        "experiment_created", "experiment_state", "experiment_failed", "experiment_queue",
        "experiment_priority", "experiment_error", "experiment_config", "experiment_meta",
        "trial_created", "trial_continued", "trial_state", "op_issued", "trial_closed",
        "trial_stop", "searcher_shutdown", "searcher_event", "run_submitting", "run_submitted",
        "run_ended", "checkpoint_deleted", "array_submitting", "array_submitted",
        "array_abandoned",
    }


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        rows, skipped = replay(Path(d))
    if skipped:
        sys.exit(f"entries skipped: {skipped}")
    (GOLDEN / "tables.json").write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
