"""The benches seed their databases with SQL that names only the columns they set: a column
added later needs a server default, or every bench that seeds fails (the bench smoke did, twice).
Here the seeds run against a fresh store in milliseconds."""

from __future__ import annotations

from pathlib import Path

from bench import ingest, seed
from hpcdet.store.repository import Store


def test_the_benches_seeds_go_into_a_fresh_store(tmp_path: Path) -> None:
    store = ingest._store(tmp_path / "ingest.db")  # an experiment, a trial and a run
    [run] = store.runs()
    assert (run.usage_by, run.started) == ("", None)
    other = Store(tmp_path / "seed.db")
    cfg = seed.config("x", {"name": "random", "metric": "x", "max_trials": 2, "max_length": 1})
    with other.engine.begin() as conn:
        seed.experiment(conn, 1, "x", cfg)
        seed.trials(conn, 1, [(1, {"lr": 0.01, "layers": 2}, 100, 0.5)])
    assert (other.experiment(1).task, other.experiment(1).advice) == ("", "")
    assert other.trial(1).steps_completed == 100
