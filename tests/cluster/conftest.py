"""Fixtures for tests against the real two-node Slurm test cluster.

Every test under ``tests/cluster/`` is marked ``slurm``. The ``slurm_cluster`` fixture makes sure
``scripts/slurm-test-cluster.sh`` reports the cluster up, starting it once per session when
running as root. If the cluster is still unavailable the test is skipped, except under ``CI=true``,
where it fails: CI is expected to run these tests, so a missing cluster is a failure there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.support import (
    CONTAINER_TESTS_ROOT,
    Hpcdet,
    Images,
    ensure_user,
    slurm_jobs_under,
)

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


def unavailable(reason: str) -> NoReturn:
    """A Slurm test cannot run here: a failure under ``CI=true`` (CI must run it), else a skip."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


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
        unavailable(f"Slurm test cluster is not available.{hint}\n{report}")
    return SlurmTestCluster()


# Where the guard below writes what it found wrong; scripts/test.sh prints it after the Slurm
# phases (the cluster script's run directory, which a fresh machine empties at boot).
INCIDENTS = Path(os.environ.get("HPCDET_TEST_INCIDENTS", "/run/hpcdet-slurm/incidents.log"))


@pytest.fixture(autouse=True)
def healthy_cluster(request: pytest.FixtureRequest, slurm_cluster: SlurmTestCluster) -> None:
    """Each Slurm test starts on a cluster whose daemons live and whose nodes are up.

    Debian's slurmd 22.05 has aborted here under concurrent step launches (glibc: "unaligned
    tcache chunk detected", a core in /var/log/slurm). Without this guard one such crash fails
    every later test, each after its own long wait. A dead daemon is started again and a node
    left down is resumed, as a real site's service manager and ReturnToService would do; what was
    wrong is written to INCIDENTS, so the test that met the crash still fails and the run says
    why. A cluster that cannot be brought back fails the test at once."""
    up, report = _run_script("status", _STATUS_TIMEOUT_S)
    if up:
        return
    started, start_report = _run_script("start", _START_TIMEOUT_S) if _is_root() else (False, "")
    INCIDENTS.parent.mkdir(parents=True, exist_ok=True)
    with INCIDENTS.open("a") as f:
        f.write(f"before {request.node.nodeid}: the cluster was not up\n{report}\n"
                f"{'restarted' if started else 'could NOT be restarted'}:\n{start_report}\n\n")
    if not started:
        unavailable(f"the Slurm test cluster went down and could not be restarted\n{report}\n"
                    f"{start_report}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees every collected item of the session, not only those in this directory.
    for item in items:
        if CLUSTER_TESTS_DIR in item.path.parents:
            item.add_marker(pytest.mark.slurm)


def require_module(name: str) -> None:
    """A Slurm test's optional Python module: missing fails under CI=true, else skips."""
    try:
        __import__(name)
    except ImportError:
        unavailable(f"needs the Python module {name} (scripts/test.sh installs it)")


USERS = ("hpcdet-u1", "hpcdet-u2")


def _require_root(what: str) -> None:
    if not _is_root():
        unavailable(f"{what} needs root (it creates users); run the tests as root")


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temporary directory other users can read (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="hpcdet-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def users(slurm_cluster: Any, user_python: str, open_tmp: Path) -> Iterator[dict[str, Hpcdet]]:
    """Two unprivileged users (created if missing), each with their own hpcdet on Slurm."""
    for name in USERS:
        ensure_user(name)
    result = {name: Hpcdet(open_tmp / name, "slurm", user=name, python=user_python)
              for name in USERS}
    yield result
    for name, h in result.items():
        h.stop()
        subprocess.run(["scancel", "--user", name], check=False, capture_output=True)


@pytest.fixture
def slurm_hpcdet(slurm_cluster: Any, tmp_path: Path) -> Iterator[Hpcdet]:
    """One user's hpcdet on the Slurm backend. After the test its daemon stops and the jobs
    it leaves are canceled: tests share the cluster, and a job left behind (an array task
    waiting for a trial that will never come) would hold CPUs the next tests need."""
    h = Hpcdet(tmp_path / "user", "slurm")
    yield h
    h.stop()
    left = slurm_jobs_under(h.root)
    if left:
        subprocess.run(["scancel", *sorted(left)], check=False, capture_output=True)


@pytest.fixture
def slurm_image_hpcdet(slurm_cluster: Any, container_root: Path,
                       images: Images) -> Iterator[Hpcdet]:
    """hpcdet on Slurm with the Apptainer double on PATH (hence on the nodes' PATH)."""
    h = Hpcdet(container_root / "user", "slurm", extra_env=images.env())
    yield h
    h.stop()
    left = slurm_jobs_under(h.root)
    if left:
        subprocess.run(["scancel", *sorted(left)], check=False, capture_output=True)


@pytest.fixture(scope="session")
def torch_image(slurm_cluster: Any) -> Iterator[Path]:
    """The files of a trial image with torch and mpi4py for the Apptainer double: the test
    environment's lib/ (site-packages and MPICH's libmpi), hard-linked (no copy of 1 GB)
    outside /tmp, for Debian's python3."""
    import torch

    lib = Path(torch.__file__).parents[3]
    CONTAINER_TESTS_ROOT.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="torch-image-", dir=CONTAINER_TESTS_ROOT))
    done = subprocess.run(["cp", "-al", str(lib), str(base / "lib")], capture_output=True)
    if done.returncode != 0:  # another filesystem: a real copy
        shutil.copytree(lib, base / "lib", symlinks=True)
    yield base
    shutil.rmtree(base, ignore_errors=True)
