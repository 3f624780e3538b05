"""The model registry: models and versions journaled in the registry's own journal, rebuilt
from it, and kept by every deletion of checkpoints."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from hpcdet.daemon.commands import Commands
from hpcdet.daemon.ingestion import Ingestion
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.registry import Registry, check_model_name
from hpcdet.errors import NotFoundError, StateError, UsageError
from hpcdet.store.entries import ExperimentStateChanged, TrialStateChanged
from hpcdet.store.repository import Store
from tests.unit.daemon.services.support import World

# Keep nothing: every checkpoint of an ended trial is GC's, but for the registered ones.
KEEP_NONE = {"type": "shared_fs", "save_trial_best": 0, "save_trial_latest": 0,
             "save_experiment_best": 0}


def _three_checkpoints(tmp_path: Path) -> World:
    """Experiment 1, trial 1 with checkpoints c1..c3 (files in ``tmp_path/ckpts``)."""
    w = World(tmp_path)
    w.experiment(1, checkpoint_storage={**KEEP_NONE, "host_path": str(tmp_path / "ckpts")})
    w.trial(1, 1)
    run_dir = w.run(1, 1, job_id="101")
    events = []
    for steps, loss in ((1, 0.9), (2, 0.1), (3, 0.5)):
        (tmp_path / "ckpts" / f"c{steps}").mkdir(parents=True)
        (tmp_path / "ckpts" / f"c{steps}" / "w.bin").write_text("x")
        events += [("metrics", {"group": "validation", "steps_completed": steps,
                                "metrics": {"loss": loss}}),
                   ("checkpoint", {"uuid": f"c{steps}", "steps_completed": steps})]
    w.report(run_dir, *events)
    Ingestion(w.store, w.paths, w.configs, w.search, w.guard()).ingest(w.store.runs()[0])
    return w


def _registry(w: World) -> Registry:
    return Registry(w.store, w.journal, w.configs, w.paths)


def test_versions_number_from_one_per_model_and_keep_where_the_files_are(tmp_path: Path
                                                                         ) -> None:
    w = _three_checkpoints(tmp_path)
    r = _registry(w)
    r.create_model("mnist", "a cnn", {"task": "digits"})
    r.create_model("other", "", {})
    assert [r.register_version("mnist", u) for u in ("c1", "c3")] == [1, 2]
    assert r.register_version("other", "c3") == 1
    m = w.store.model("mnist")
    assert (m.description, m.metadata) == ("a cnn", {"task": "digits"})
    assert [(v.version, v.uuid, v.trial_id, v.steps_completed) for v in m.versions] == [
        (1, "c1", 1, 1), (2, "c3", 1, 3)]
    assert m.versions[0].storage == str(tmp_path / "ckpts")
    assert sorted(w.store.registered(["c1", "c2", "c3"])) == ["c1", "c3"]
    assert [v.model for v in w.store.registered(["c3"])["c3"]] == ["mnist", "other"]


def test_refusals_say_what_to_do(tmp_path: Path) -> None:
    w = _three_checkpoints(tmp_path)
    r = _registry(w)
    r.create_model("mnist", "", {})
    with pytest.raises(StateError, match="already exists.*choose another name"):
        r.create_model("mnist", "", {})
    with pytest.raises(NotFoundError, match="checkpoint nope not found; `hpcdet checkpoint"):
        r.register_version("mnist", "nope")
    with pytest.raises(NotFoundError, match="model 'ghost' not found.*hpcdet model create"):
        r.register_version("ghost", "c1")
    assert [r.register_version("mnist", "c1") for _ in range(2)] == [1, 2]  # as Determined
    w.journal.record(1, TrialStateChanged(trial_id=1, state="COMPLETED"))
    w.retention().collect(w.store.experiment(1))
    with pytest.raises(StateError, match="is DELETED, not COMPLETED"):
        r.register_version("mnist", "c2")


@pytest.mark.parametrize("name", ["", "  ", " x", "a/b", "123", "tab\there", "x" * 256])
def test_model_names_are_checked(name: str) -> None:
    with pytest.raises(UsageError, match="hpcdet model create"):
        check_model_name(name)


def test_the_journal_is_private_and_rebuilds_the_registry(tmp_path: Path) -> None:
    w = _three_checkpoints(tmp_path)
    r = _registry(w)
    r.create_model("mnist", "d", {"k": 1})
    r.register_version("mnist", "c2")
    journal = w.paths.registry_journal()
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    assert stat.S_IMODE(journal.parent.stat().st_mode) == 0o700
    before = w.store.models()
    w.store.engine.dispose()
    w.paths.database().unlink()
    rebuilt = Store(w.paths.database())
    Journal(w.paths, rebuilt).replay_all()
    assert rebuilt.models() == before
    assert Journal(w.paths, rebuilt).replay_registry() == 0  # applied once


def test_gc_keeps_a_registered_checkpoint_its_policy_would_delete(tmp_path: Path) -> None:
    w = _three_checkpoints(tmp_path)
    r = _registry(w)
    r.create_model("mnist", "", {})
    r.register_version("mnist", "c1")
    w.journal.record(1, TrialStateChanged(trial_id=1, state="COMPLETED"))
    w.retention().collect(w.store.experiment(1))
    assert [c.uuid for c in w.store.checkpoints(exp_id=1)] == ["c1"]
    assert sorted(p.name for p in (tmp_path / "ckpts").iterdir()) == ["c1"]


def test_an_explicit_delete_of_a_registered_checkpoint_is_refused(tmp_path: Path) -> None:
    w = _three_checkpoints(tmp_path)
    r = _registry(w)
    r.create_model("mnist", "", {})
    r.register_version("mnist", "c1")
    r.register_version("mnist", "c2")
    with pytest.raises(StateError, match="c2 is version 2 of model 'mnist'.*model describe"):
        w.retention().delete(w.store.checkpoint("c2"))
    assert (tmp_path / "ckpts" / "c2" / "w.bin").exists()
    assert w.store.checkpoint("c2").state == "COMPLETED"


def test_deleting_the_experiment_keeps_registered_files_and_versions(tmp_path: Path) -> None:
    w = _three_checkpoints(tmp_path)
    r = _registry(w)
    r.create_model("mnist", "", {})
    r.register_version("mnist", "c3")
    w.journal.record(1, TrialStateChanged(trial_id=1, state="COMPLETED"))
    w.journal.record(1, ExperimentStateChanged(state="COMPLETED"))
    commands = Commands(w.store, w.journal, w.paths, w.configs, None, None,  # type: ignore[arg-type]
                        w.retention(), None, None, None, lambda: None)  # type: ignore[arg-type]
    commands.delete_experiment(1)
    assert sorted(p.name for p in (tmp_path / "ckpts").iterdir()) == ["c3"]
    [v] = w.store.model("mnist").versions
    assert (v.uuid, v.storage) == ("c3", str(tmp_path / "ckpts"))
