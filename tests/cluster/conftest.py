"""Fixtures for tests against the real two-node Slurm test cluster.

Every test under ``tests/cluster/`` is marked ``slurm``. The ``slurm_cluster`` fixture makes sure
``scripts/slurm-test-cluster.sh`` reports the cluster up, starting it once per session when
running as root. If the cluster is still unavailable the test is skipped, except under ``CI=true``,
where it fails: CI is expected to run these tests, so a missing cluster is a failure there.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import Hpcdet

CLUSTER_TESTS_DIR = Path(__file__).resolve().parent
CLUSTER_SCRIPT = CLUSTER_TESTS_DIR.parents[1] / "scripts" / "slurm-test-cluster.sh"

_STATUS_TIMEOUT_S = 60
# A first start installs slurm-wlm and munge with apt.
_START_TIMEOUT_S = 900


@dataclass(frozen=True)
class SlurmTestCluster:
    """What the tests may rely on; mirrors the constants in ``scripts/slurm-test-cluster.sh``."""

    cluster_name: str = "hpcdet-test"
    nodes: tuple[str, ...] = ("node1", "node2")
    node_addresses: tuple[str, ...] = ("10.197.0.11", "10.197.0.12")
    partitions: tuple[str, ...] = ("debug", "batch")
    default_partition: str = "debug"
    cpus_per_node: int = 4
    script: Path = CLUSTER_SCRIPT


def _run_script(command: str, timeout: float) -> tuple[bool, str]:
    """Runs the cluster script; returns (succeeded, combined output)."""
    try:
        proc = subprocess.run(
            ["bash", str(CLUSTER_SCRIPT), command],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{CLUSTER_SCRIPT.name} {command}: {exc}"
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmTestCluster:
    """The running test cluster; skips (fails under ``CI=true``) if it cannot be brought up.

    pytest caches a session fixture's skip or failure, so ``start`` is attempted at most once per
    session (per xdist worker; the script serialises concurrent starts with a lock).
    """
    up, report = _run_script("status", _STATUS_TIMEOUT_S)
    if not up and _is_root():
        started, start_report = _run_script("start", _START_TIMEOUT_S)
        up, report = _run_script("status", _STATUS_TIMEOUT_S)
        if not up:
            report = f"{start_report}\n{report}"
    if not up:
        hint = "" if _is_root() else f" Start it as root: sudo {CLUSTER_SCRIPT} start"
        reason = f"Slurm test cluster is not available.{hint}\n{report}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return SlurmTestCluster()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees every collected item of the session, not only those in this directory.
    for item in items:
        if CLUSTER_TESTS_DIR in item.path.parents:
            item.add_marker(pytest.mark.slurm)


@pytest.fixture
def slurm_hpcdet(slurm_cluster: Any, tmp_path: Path) -> Iterator[Hpcdet]:
    """One user's hpcdet on the Slurm backend; its daemon stops after the test."""
    h = Hpcdet(tmp_path / "user", "slurm")
    yield h
    h.stop()
