"""Keys hpcdet accepts from Determined's config but does not apply are named, with why."""

from __future__ import annotations

from typing import Any

from hpcdet.config import ExperimentConfig
from hpcdet.config.unapplied import NOT_APPLIED, not_applied

BASE: dict[str, Any] = {"name": "x", "entrypoint": "python3 t.py",
                        "searcher": {"name": "single", "metric": "x", "max_length": 1}}


def _said(**extra: Any) -> list[str]:
    return not_applied(ExperimentConfig.from_dict({**BASE, **extra}).raw)


def test_nothing_is_said_of_a_config_that_sets_none_of_them() -> None:
    assert _said() == []
    # Determined's defaults, written out, say nothing either.
    assert _said(environment={"force_pull_image": False, "proxy_ports": [], "image": None},
                 bind_mounts=[], profiling={"enabled": False}) == []


def test_each_key_set_is_named_with_why() -> None:
    said = _said(environment={"image": {"cpu": "c.sif", "gpu": "g.sif"}},
                 bind_mounts=[{"host_path": "/data", "container_path": "/data"}],
                 min_validation_period={"batches": 10}, resources={"shm_size": "4G"})
    assert [line.split(" is accepted")[0] for line in said] == [
        "resources.shm_size", "min_validation_period"]
    assert all(" is accepted but not applied: " in line for line in said)
    assert "/dev/shm" in said[0]


def test_what_applies_inside_an_image_only_is_named_without_one() -> None:
    said = _said(environment={"force_pull_image": True, "registry_auth": {"username": "u"}},
                 bind_mounts=[{"host_path": "/data", "container_path": "/data"}])
    assert [line.split(" is accepted")[0] for line in said] == [
        "environment.force_pull_image", "environment.registry_auth", "bind_mounts"]
    assert all("names no image" in line for line in said)
    with_image = _said(environment={"image": "x.sif", "force_pull_image": True},
                       bind_mounts=[{"host_path": "/data", "container_path": "/data"}])
    assert with_image == []


def test_every_listed_key_is_one_the_config_accepts() -> None:
    for path, why in NOT_APPLIED:
        assert why
        top, _, key = path.partition(".")
        from hpcdet.config.experiment import TOP_SPECS
        assert top in TOP_SPECS, path


def test_the_section_of_another_batch_system_is_named() -> None:
    from hpcdet.config.unapplied import other_sections

    raw = ExperimentConfig.from_dict({**BASE, "slurm": {"slots_per_node": 4},
                                      "pbs": {"queue": "workq"}}).raw
    assert other_sections(raw, "pbs", "pbs") == [
        "slurm: is accepted but not applied: the backend in use is pbs"]
    assert other_sections(raw, "slurm", "local") == [
        "pbs: is accepted but not applied: the backend in use is local"]
    assert other_sections(ExperimentConfig.from_dict(BASE).raw, "slurm", "slurm") == []



def test_a_trial_class_applies_the_pytorch_api_keys_and_names_the_rest() -> None:
    keys = {"min_validation_period": {"epochs": 1}, "perform_initial_validation": True,
            "scheduling_unit": 10, "records_per_epoch": 1000,
            "optimizations": {"aggregation_frequency": 2, "mixed_precision": "O1"}}
    script = [line.split(" is accepted")[0] for line in _said(**keys)]
    assert script == ["records_per_epoch", "optimizations.aggregation_frequency",
                      "optimizations.mixed_precision", "min_validation_period",
                      "perform_initial_validation", "scheduling_unit"]
    cfg = ExperimentConfig.from_dict({**BASE, **keys, "entrypoint": "model_def:Trial",
                                      "hyperparameters": {"global_batch_size": 8}})
    said = not_applied(cfg.raw, cfg.is_trial_class)
    assert [line.split(" is accepted")[0] for line in said] == [
        "records_per_epoch", "optimizations.mixed_precision"]
    assert "Horovod or Apex" in said[1]


def test_workspace_project_and_shared_fs_paths_are_named() -> None:
    said = _said(workspace="w", project="p", checkpoint_storage={
        "type": "shared_fs", "host_path": "/scratch", "container_path": "/ckpt",
        "propagation": "rshared", "checkpoint_path": "/a", "tensorboard_path": "/b"})
    assert [line.split(" is accepted")[0] for line in said] == [
        "workspace", "project", "checkpoint_storage.container_path",
        "checkpoint_storage.propagation", "checkpoint_storage.checkpoint_path",
        "checkpoint_storage.tensorboard_path"]
    # Determined's default propagation, written out or filled in, is not the user's words.
    assert _said(checkpoint_storage={"type": "shared_fs", "host_path": "/scratch",
                                     "propagation": "rprivate"}) == []


def test_debug_is_applied_by_the_trial_class_harness_only() -> None:
    assert [line.split(" is accepted")[0] for line in _said(debug=True)] == ["debug"]
    cfg = ExperimentConfig.from_dict({**BASE, "debug": True, "entrypoint": "model_def:Trial",
                                      "hyperparameters": {"global_batch_size": 8}})
    assert not_applied(cfg.raw, cfg.is_trial_class) == []
