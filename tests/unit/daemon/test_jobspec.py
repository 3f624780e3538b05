"""What a run spec says of the trial's environment: its image or its interpreter."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from hpcdet.config import ExperimentConfig
from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.jobspec import container_problems, container_spec, run_spec, trial_python
from hpcdet.errors import ConfigError
from hpcdet.paths import StatePaths
from hpcdet.schedulers.base import BatchOptions, Placement

BASE: dict[str, Any] = {"name": "x", "entrypoint": "python3 t.py",
                        "searcher": {"name": "single", "metric": "x", "max_length": 1}}
GPU, CPU = Placement(1, 4, gpus=True), Placement(1, 4, gpus=False)


def _cfg(**extra: Any) -> ExperimentConfig:
    return ExperimentConfig.from_dict({**BASE, **extra})


def test_determineds_gpu_image_runs_on_gpu_partitions_with_the_gpu_flag(tmp_path: Path) -> None:
    cfg = _cfg(environment={"image": {"cpu": "docker://acme/cpu:1", "gpu": "acme/gpu:1"},
                            "environment_variables": {"cpu": ["A=cpu"], "gpu": ["A=gpu"]}},
               bind_mounts=[{"host_path": "/lustre/d", "container_path": "/data",
                             "read_only": True}])
    paths = StatePaths(tmp_path)
    on_gpu = container_spec(cfg, ClusterConfig(), GPU, paths)
    assert on_gpu is not None
    assert (on_gpu.image.named, on_gpu.device, on_gpu.runtime) == ("acme/gpu:1", "cuda",
                                                                    "apptainer")
    assert on_gpu.image.pull_from == "docker://acme/gpu:1"
    assert on_gpu.image.file == str(tmp_path / "images" / "acme+gpu+1.sif")
    assert [(b.host, b.target, b.read_only) for b in on_gpu.binds] == [
        ("/lustre/d", "/data", True)]
    on_cpu = container_spec(cfg, ClusterConfig(image_cache="/scratch/img"), CPU, paths)
    assert on_cpu is not None and on_cpu.device == "cpu"
    assert on_cpu.image.file == "/scratch/img/acme+cpu+1.sif"
    rocm = container_spec(cfg, ClusterConfig(slot_type="rocm"), GPU, paths)
    assert rocm is not None and (rocm.device, rocm.image.named) == ("rocm", "acme/gpu:1")
    trial = {"id": 1, "trial_seed": 3, "hparams": {}}
    spec = run_spec(cfg, paths, 1, trial, 1, BatchOptions("slurm"), GPU, ClusterConfig())
    assert spec.environment == {"A": "gpu"} and spec.container == on_gpu.to_dict()
    assert spec.python == "python3" and spec.overlay_of == []
    assert Path(spec.trialside).parent == tmp_path / "trialside"


def test_without_an_image_the_trial_runs_with_its_python(tmp_path: Path) -> None:
    assert container_spec(_cfg(), ClusterConfig(), GPU, StatePaths(tmp_path)) is None
    python, overlay = trial_python(_cfg(environment={"python": sys.executable}),
                                   ClusterConfig(), None)
    assert python == sys.executable and overlay  # hpcdet's own: overlaid
    python, overlay = trial_python(_cfg(), ClusterConfig(python="/usr/bin/python3"), None)
    assert (python, overlay) == ("/usr/bin/python3", [])


def test_what_the_runtime_cannot_do_is_an_error() -> None:
    cfg = _cfg(environment={"image": "acme/x:1", "registry_auth": {"username": "u"}})
    assert container_problems(cfg, ClusterConfig()) == []
    said = container_problems(cfg, ClusterConfig(container_runtime="podman"))
    assert said and said[0].startswith("environment.registry_auth:") and "podman login" in said[0]


def test_what_an_image_config_sets_and_hpcdet_does_not_apply_is_named() -> None:
    from hpcdet.daemon.jobspec import container_warnings

    cfg = _cfg(environment={"image": "acme/x:1", "python": "/opt/py/bin/python3",
                            "registry_auth": {"username": "u", "password": "p",
                                              "serveraddress": "ghcr.io"}},
               bind_mounts=[{"host_path": "/d", "container_path": "/d", "propagation": "shared"}])
    said = container_warnings(cfg, ClusterConfig())
    assert [line.split(" is accepted")[0] for line in said] == [
        "bind_mounts[0].propagation shared", "environment.python /opt/py/bin/python3",
        "environment.registry_auth.serveraddress"]
    assert container_warnings(_cfg(environment={"image": "acme/x:1"}), ClusterConfig()) == []
    # Podman and Docker apply it (--volume host:target:rslave).
    for runtime in ("podman", "docker"):
        said = container_warnings(cfg, ClusterConfig(container_runtime=runtime))
        assert not any("propagation" in line for line in said), said


def test_docker_is_a_container_runtime_of_the_cluster_config(tmp_path: Path) -> None:
    from hpcdet.config.cluster import load_cluster_config

    user = tmp_path / "cluster.yaml"
    user.write_text("container_runtime: docker\n")
    cluster = load_cluster_config(user_path=user, env={"HOME": str(tmp_path)})
    assert cluster.container_runtime == "docker"
    cfg = _cfg(environment={"image": "docker://acme/x:1"},
               bind_mounts=[{"host_path": "/d", "container_path": "/d", "read_only": True,
                             "propagation": "rslave"},
                            {"host_path": "/e", "container_path": "/e"}])
    spec = container_spec(cfg, cluster, CPU,
                          StatePaths(tmp_path / "state"))
    assert spec is not None and spec.runtime == "docker"
    assert spec.image.file == "acme/x:1" and spec.image.pull_from is None
    assert [b.options() for b in spec.binds] == [":ro,rslave", ""]


def test_an_unknown_propagation_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"bind_mounts\[0\]\.propagation.*must be one of "
                       r"rprivate, private, rshared, shared, rslave, slave"):
        _cfg(bind_mounts=[{"host_path": "/d", "container_path": "/d", "propagation": "slaved"}])
