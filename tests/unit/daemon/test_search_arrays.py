"""Job arrays of a search, from the daemon's side (their planning: tests/unit/test_arrays.py)."""

from __future__ import annotations

from pathlib import Path

from hpcdet.search import TrialExited
from hpcdet.search.base import EXIT_INVALID_HP
from tests.unit.daemon.fake_slurm import FakeSlurm, create_search


def test_a_replacement_for_invalid_hyperparameters_gets_an_array_task(tmp_path: Path) -> None:
    """Random search replaces a trial that exits with InvalidHP without counting it against
    max_trials: the replacement's request lies past the array planned for max_trials."""
    runner = FakeSlurm()
    daemon = create_search(tmp_path, runner, max_trials=2)
    assert [(a.offset, a.count) for a in daemon.store.arrays(1)] == [(0, 2)]
    runner.state = "RUNNING"  # no task of array0 waits any more
    exp = daemon.store.experiment(1)
    daemon.search.feed(exp, daemon._config(exp), TrialExited(0, EXIT_INVALID_HP), None)
    daemon.poll_scheduler()
    daemon.tick()
    assert [(a.offset, a.count) for a in daemon.store.arrays(1)] == [(0, 2), (2, 1)]
    replacement = next(t for t in daemon.store.trials(1) if t.request_id == 2)
    runs = [r for r in daemon.store.runs() if r.trial_id == replacement.id]
    assert [(r.state, r.job_id) for r in runs] == [("PENDING", "501_0")]
