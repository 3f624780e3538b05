"""A daemon killed right after any one journal entry of a short ASHA search: the next daemon
finishes the search; every run ends, every trial reaches a final state, and the stored metric
rows are exactly the reported ones.

The search (adaptive ASHA, aggressive mode, two trials, one at a time) is as small as covers
every kind of entry the daemon writes in a search: creation, searcher inputs and decisions
(trial created, operation issued, trial closed, shutdown), submissions, run ends with each
decision (waiting for a promotion, promoted and resubmitted, completed), checkpoint GC and the
experiment's end. Each boundary is one test case, so a failure names the entry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hpcdet.states import FINAL_TRIAL_STATES, LIVE_RUN_STATES
from tests.unit.daemon.fake_local import (
    FakeLocal,
    Killed,
    asha_config,
    create,
    drive,
    kill_after,
    new_daemon,
    stored_metrics,
)

CONFIG = asha_config(max_trials=2, max_concurrent_trials=1, mode="aggressive")
ENTRIES = 26  # in the uninterrupted search


def _search(root: Path, monkeypatch: pytest.MonkeyPatch, entry: int | None) -> list[str]:
    """Run the search; the first daemon dies right after entry number ``entry``. Returns the
    kinds of the entries written, in order."""
    written = kill_after(monkeypatch, lambda written: len(written) == entry)
    cluster = FakeLocal()
    daemon = new_daemon(root, cluster)
    try:
        daemon.reconcile()
        create(daemon, CONFIG)
        drive(daemon, cluster)
    except Killed:
        daemon.store.close()
        cluster.step()  # the jobs go on while no daemon runs
        daemon = new_daemon(root, cluster)
        daemon.reconcile()
        drive(daemon, cluster)
    _check_finished(daemon, cluster)
    daemon.store.close()
    return written


def _check_finished(daemon: Any, cluster: FakeLocal) -> None:
    [exp] = daemon.store.experiments()
    trials = daemon.store.trials(exp.id)
    assert exp.state == "COMPLETED", exp.error
    assert [t.state for t in trials if t.state not in FINAL_TRIAL_STATES] == []
    assert [(r.trial_id, r.run_id) for r in daemon.store.runs() if r.state in LIVE_RUN_STATES
            ] == []
    assert not cluster.live()
    assert stored_metrics(daemon) == cluster.reported
    # Each operation the searcher issued was run and decided once, whatever the kill.
    assert sum(len(t.ops) for t in trials) == sum(
        r.ops_decided for r in daemon.store.runs())


def test_the_uninterrupted_search_writes_every_kind_of_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kinds = _search(tmp_path, monkeypatch, None)
    assert len(kinds) == ENTRIES, kinds
    assert set(kinds) >= {"experiment_created", "searcher_event", "trial_created", "op_issued",
                          "trial_closed", "searcher_shutdown", "run_submitting", "run_submitted",
                          "run_ended", "checkpoint_deleted", "experiment_state"}


@pytest.mark.parametrize("entry", range(1, ENTRIES + 1))
def test_killed_after_entry(entry: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _search(tmp_path, monkeypatch, entry)


def test_daemons_killed_one_after_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Daemon i dies right after the 1st, 2nd or 3rd entry it writes (i mod 3), also while it
    reconciles, until one finishes. (Dying always after the first would never let a run be
    submitted: the next daemon must first settle the run the last one left submitting.)"""
    since_start = [0]
    lives = [1]

    def last_entry_of_this_daemon(written: list[str]) -> bool:
        since_start[0] += 1
        return since_start[0] == lives[0]

    written = kill_after(monkeypatch, last_entry_of_this_daemon)
    cluster = FakeLocal()
    for daemons in range(1, 3 * ENTRIES):
        daemon = new_daemon(tmp_path, cluster)
        since_start[0], lives[0] = 0, 1 + (daemons - 1) % 3
        try:
            daemon.reconcile()
            if daemons == 1:
                create(daemon, CONFIG)
            drive(daemon, cluster)
            break
        except Killed:
            daemon.store.close()
            cluster.step()
    _check_finished(daemon, cluster)
    assert daemons > ENTRIES / 2, written
