"""Trials in an image on the two-node Slurm, on the real runtimes (scripts/container-runtimes.sh):
the tutorial on each, what reaches the trial as HPC users run containers (unprivileged), and
the torch DDP example and the MPI launcher over both nodes in Apptainer."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import container_scenarios, runtime_scenarios, scenarios
from tests.conftest import runtime_hpcdet
from tests.runtimes import ALL, Runtime
from tests.support import Hpcdet, slurm_jobs_under


@pytest.fixture(params=ALL, ids=lambda rt: rt.id)
def runtime(request: pytest.FixtureRequest) -> Runtime:
    rt: Runtime = request.param
    return rt


@pytest.fixture
def slurm_runtime_hpcdet(slurm_cluster: Any, runtime: Runtime, container_root: Path,
                         request: pytest.FixtureRequest) -> Iterator[Hpcdet]:
    h = runtime_hpcdet(runtime, "slurm", container_root, request)
    yield h
    h.stop()
    left = slurm_jobs_under(h.root)
    if left:
        subprocess.run(["scancel", *sorted(left)], check=False, capture_output=True)


def test_the_tutorial_runs_in_each_runtime(
        slurm_runtime_hpcdet: Hpcdet, runtime: Runtime, container_root: Path) -> None:
    runtime_scenarios.tutorial(slurm_runtime_hpcdet, runtime, container_root)


@pytest.mark.parametrize("runtime", [rt for rt in ALL if rt.rootless], ids=lambda rt: rt.id,
                         indirect=True)
def test_binds_variables_and_the_hook_reach_an_unprivileged_users_trial(
        slurm_runtime_hpcdet: Hpcdet, runtime: Runtime, container_root: Path) -> None:
    runtime_scenarios.what_reaches_the_trial(slurm_runtime_hpcdet, runtime, container_root)


@pytest.mark.parametrize("runtime", [ALL[1]], ids=lambda rt: rt.id, indirect=True)
def test_torch_ddp_runs_its_workers_in_apptainer_on_two_nodes(
        slurm_runtime_hpcdet: Hpcdet, container_root: Path, torch_image: Path) -> None:
    h = slurm_runtime_hpcdet
    h.create_overrides = runtime_scenarios.torch_in_apptainer(h, torch_image)
    scenarios.ddp(h, h.mkdir(container_root / "t"), "ddp_determined.yaml")


@pytest.mark.parametrize("runtime", [ALL[1]], ids=lambda rt: rt.id, indirect=True)
def test_the_mpi_launcher_runs_its_ranks_in_apptainer_on_two_nodes(
        slurm_runtime_hpcdet: Hpcdet, container_root: Path, torch_image: Path) -> None:
    h = slurm_runtime_hpcdet
    h.create_overrides = runtime_scenarios.torch_in_apptainer(h, torch_image)
    out = container_scenarios.mpi_over_two_nodes(h, h.mkdir(container_root / "t"))
    assert out.count("image=/var/cache/hpcdet-test-images/hpcdet-test-base.sif") == 4, out


def test_dockerd_leaves_the_firewall_and_the_test_clusters_bridge_alone(
        slurm_cluster: Any) -> None:
    """Docker by default sets FORWARD's policy to DROP and adds its own chains and bridge,
    which would cut the nodes off each other; the test suite's dockerd runs without them."""
    from tests.runtimes import require_runtimes

    require_runtimes()
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True,
                           check=True).stdout
    assert "-P FORWARD ACCEPT" in rules and "DOCKER" not in rules, rules
    assert "-A FORWARD -i hpcdet-br0 -o hpcdet-br0 -j ACCEPT" in rules, rules
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                           check=True).stdout
    assert "docker0" not in links, links
