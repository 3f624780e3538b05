"""The CLI's read path (hpcdet.store.reads) gives the rows the ORM store gives, and `hpcdet`
starts without the ORM, rich or the daemon's code."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import pytest

from hpcdet.errors import NotFoundError, StoreError
from hpcdet.states import TrialState
from hpcdet.store.models import ArrayJob, Experiment, Run, Trial
from hpcdet.store.reads import (
    ARRAY_COLUMNS,
    EXPERIMENT_COLUMNS,
    RUN_COLUMNS,
    TRIAL_COLUMNS,
    Reads,
)
from hpcdet.views.experiments import experiment_rows
from tests.unit.store.store_support import Journaled

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def j(tmp_path: Path) -> Journaled:
    """Experiments 1..4: 2 archived, 3 labelled a and b, 4 labelled a; trials with runs, an
    array of experiment 1 submitted and one not yet."""
    j = Journaled(tmp_path)
    for exp_id in range(1, 5):
        j.experiment(exp_id)
    j.record(2, "experiment_meta", archived=True)
    j.record(3, "experiment_meta", labels=["a", "b"], description="three")
    j.record(4, "experiment_meta", labels=["a"])
    for trial_id, exp_id in ((1, 1), (2, 1), (3, 3)):
        j.trial(exp_id, trial_id, request_id=trial_id)
        j.run(exp_id, trial_id, job_id=f"10{trial_id}")
    j.run(1, 1, run_id=2)
    j.record(1, "trial_state", trial_id=2, state="COMPLETED")
    j.record(1, "array_submitted", index=0, offset=0, count=2, throttle=1, job_id="77")
    j.record(1, "array_submitting", index=1, offset=2, count=1, throttle=1)
    return j


@pytest.mark.parametrize(("columns", "model"), [
    (EXPERIMENT_COLUMNS, Experiment), (TRIAL_COLUMNS, Trial), (RUN_COLUMNS, Run),
    (ARRAY_COLUMNS, ArrayJob)])
def test_reads_know_the_models_columns_in_order(columns: tuple[str, ...], model: type) -> None:
    assert list(columns) == list(model.model_fields)  # type: ignore[attr-defined]


def test_reads_give_the_records_the_store_gives(j: Journaled) -> None:
    with Reads(j.store.path) as reads:
        assert reads.experiments() == j.store.experiments()
        assert reads.trials() == j.store.trials()
        assert reads.trials(1) == j.store.trials(1)
        assert reads.experiment_runs(1) == j.store.runs([1, 2])
        assert reads.arrays(1) == j.store.arrays(1)
        assert reads.experiment(3) == j.store.experiment(3)
        assert reads.trial_work() == j.store.trial_work()
        archived = reads.experiment(2).archived
        assert archived is True  # a bool, as the ORM gives it, not SQLite's 1
        assert reads.experiment(3).labels == ("a", "b")  # decoded
        assert reads.trials(1)[1].state is TrialState.COMPLETED  # the enum


def test_experiments_are_chosen_in_sql(j: Journaled) -> None:
    with Reads(j.store.path) as reads:
        def ids(**how: object) -> list[int]:
            return [e.id for e in reads.experiments(**how)]  # type: ignore[arg-type]

        assert ids() == [1, 2, 3, 4]
        assert ids(archived=False) == [1, 3, 4]
        assert ids(labels=["a"]) == [3, 4]
        assert ids(labels=["a", "b"]) == [3]
        assert ids(labels=["c"]) == []
        assert ids(offset=1, limit=2) == [2, 3]
        assert ids(archived=False, offset=1) == [3, 4]
        with pytest.raises(StoreError, match="config was not read"):
            reads.experiments(config=False)[0].config  # noqa: B018
        assert reads.experiments()[0].config.name == "x"
        assert reads.trial_work(3, 4) == {3: (1, 0.0)}


def test_a_listing_page_has_the_progress_of_the_whole_list(j: Journaled) -> None:
    every = {r.experiment.id: r.progress for r in experiment_rows(j.store)}
    assert every[1] == 0.5  # one of two trials done
    with Reads(j.store.path) as reads:
        page = experiment_rows(reads, archived=False, offset=1, limit=1)
    assert [(r.experiment.id, r.progress) for r in page] == [(3, every[3])]


def test_what_is_missing_is_named(j: Journaled, tmp_path: Path) -> None:
    with Reads(j.store.path) as reads, pytest.raises(NotFoundError, match="experiment 9 not"):
        reads.experiment(9)
    with pytest.raises(StoreError, match="no database"):
        Reads(tmp_path / "none.db")


def test_the_database_is_opened_read_only(j: Journaled) -> None:
    with Reads(j.store.path) as reads, pytest.raises(StoreError, match="readonly"):
        reads._rows("DELETE FROM experiment")


# What `hpcdet experiment list` and `describe` must not import: each costs the CLI's start
# more than the command's own work (SQLAlchemy and SQLModel alone were 0.46 s).
HEAVY = ["sqlalchemy", "sqlmodel", "rich", "jinja2", "yaml", "starlette", "hpcdet.link.files",
         "hpcdet.daemon.loop", "hpcdet.store.repository"]


@pytest.mark.parametrize("args", [["version"], ["experiment", "list", "--json"],
                                  ["experiment", "describe", "1"]])
def test_the_listing_commands_start_without_heavy_imports(
    j: Journaled, tmp_path: Path, args: list[str]
) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("backend: local\n")
    program = ("import runpy, sys\n"
               f"sys.argv = ['hpcdet', *{args!r}]\n"
               "try:\n"
               "    runpy.run_module('hpcdet.cli.main', run_name='__main__')\n"
               "finally:\n"
               f"    print(sorted(set({HEAVY!r}) & set(sys.modules)), file=sys.stderr)\n")
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HPCDET_HOME": str(tmp_path),
             "HPCDET_CLUSTER_CONFIG": str(cluster)})
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "[]"


def test_records_are_built_with_every_field(j: Journaled) -> None:
    """The store builds records without their __init__ (a listing builds thousands)."""
    with Reads(j.store.path) as reads:
        built = [*reads.experiments(), *reads.trials(), *reads.experiment_runs(1),
                 *reads.arrays(1), *j.store.experiments(), *j.store.trials()]
    for record in built:
        assert set(vars(record)) == {f.name for f in fields(record)}, type(record)
        assert replace(record) == record  # the generated __init__ takes them back
