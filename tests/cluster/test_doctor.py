"""`hpcdet doctor` on the real two-node Slurm: once as the cluster is, with the preemption
drill (green, but for the image registry no node reaches; about 20 s, the drill's experiment
most of it), once with a partition that does not exist and a runtime that is not installed
(about 2 s). Each run is shared by its assertions."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import SlurmTestCluster
from tests.support import Hpcdet, slurm_jobs_under


def _doctor(h: Hpcdet, *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    p = h.run("doctor", "--json", *args, check=False, timeout=120)
    found = json.loads(p.stdout)
    assert found["ok"] == (p.returncode == 0), p.stdout
    return p.returncode, {f["check"]: f for f in found["findings"]}


def _hpcdet(tmp: pytest.TempPathFactory, name: str) -> Iterator[Hpcdet]:
    h = Hpcdet(tmp.mktemp(name) / "user", "slurm")
    yield h
    h.stop()  # the preemption drill's experiment started the user's daemon
    left = slurm_jobs_under(h.root)
    if left:
        subprocess.run(["scancel", *sorted(left)], check=False, capture_output=True)


@pytest.fixture(scope="module")
def green_hpcdet(slurm_cluster: SlurmTestCluster, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[Hpcdet]:
    yield from _hpcdet(tmp_path_factory, "doctor")


@pytest.fixture(scope="module")
def broken_hpcdet(slurm_cluster: SlurmTestCluster, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[Hpcdet]:
    yield from _hpcdet(tmp_path_factory, "doctor-broken")


def _wait_for_idle_cpus(nodes: tuple[str, ...], seconds: float) -> None:
    """Until each node has an idle CPU (other tests share the cluster; a busy cluster is only
    a warning, which this test would take for a failure)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out = subprocess.run(["sinfo", "-N", "-h", "-o", "%N %C"], capture_output=True,
                             text=True, timeout=30).stdout
        idle = {n: int(c.split("/")[1]) for n, c in (line.split() for line in out.splitlines())}
        if all(idle.get(n, 0) > 0 for n in nodes):
            return
        time.sleep(1)


@pytest.fixture(scope="module")
def green(green_hpcdet: Hpcdet, slurm_cluster: SlurmTestCluster
          ) -> tuple[int, dict[str, dict[str, Any]]]:
    _wait_for_idle_cpus(slurm_cluster.nodes, 15)
    return _doctor(green_hpcdet, "--timeout", "40", "--preemption", "--drill-timeout", "60")


@pytest.fixture(scope="module")
def broken(broken_hpcdet: Hpcdet) -> tuple[int, dict[str, dict[str, Any]]]:
    assert shutil.which("enroot") is None, "the test needs a runtime that is not installed"
    (broken_hpcdet.root / "cluster.yaml").write_text(
        "backend: slurm\ncontainer_runtime: enroot\n")
    return _doctor(broken_hpcdet, "--partition", "nope", "--timeout", "20")


def test_the_test_cluster_is_green_but_for_the_registry(
        green: tuple[int, dict[str, dict[str, Any]]], slurm_cluster: SlurmTestCluster) -> None:
    code, found = green
    assert code == 0
    status = {check: f["status"] for check, f in found.items()}
    # No registry is reachable from here: honestly a warning.
    assert status.pop("registry from nodes") == "warn"
    assert "registry-1.docker.io:443" in found["registry from nodes"]["seen"]
    assert set(status.values()) == {"ok"}, found
    assert found["backend"]["seen"].startswith("slurm 22.05")
    assert found["partition"]["seen"].startswith("debug (default): up")
    assert "largest array 1000" in found["limits"]["seen"]
    # slurmdbd: sacct for ended jobs, and sacctmgr for the limits of root's association.
    assert found["job history"]["seen"] == "sacct (accounting_storage/slurmdbd)"
    assert "no per-user limit in your associations or their QOS" in found["limits"]["seen"]
    # Jobs in `debug` are never preempted; only `preemptible`'s are (tests/cluster/
    # test_preemption.py).
    assert "PreemptType=preempt/partition_prio" in found["preemption"]["seen"]
    assert "partition debug is not preempted" in found["preemption"]["seen"]
    assert "written on node" in found["state directory"]["seen"]
    assert "written on node" in found["checkpoint storage"]["seen"]
    net = found["network"]["seen"]
    assert "interface eth0 / eth0" in net
    assert {a for a in slurm_cluster.node_addresses if a in net} == set(
        slurm_cluster.node_addresses)


def test_the_preemption_drill_checkpoints_stops_and_resumes(
        green: tuple[int, dict[str, dict[str, Any]]], green_hpcdet: Hpcdet) -> None:
    drill = green[1]["preemption drill"]
    assert drill["status"] == "ok", drill
    seen = re.fullmatch(r"experiment (\d+): after its first checkpoint, at step \d+, "
                        r"`scancel --signal=USR2 --batch (\d+)`: job \2 checkpointed and "
                        r"stopped \(preempted\), job (\d+) resumed from step (\d+) and "
                        r"completed( \(before it: .*\))?", drill["seen"])
    assert seen, drill["seen"]
    d = green_hpcdet.describe(int(seen[1]))
    assert d["experiment"]["name"] == "hpcdet doctor: preemption drill"
    assert d["config"]["labels"] == ["hpcdet-doctor"]
    # Other tests on this cluster may fail a node under an earlier run: judged from the
    # signaled job on.
    runs = [(r["job_id"], r["outcome"]) for r in d["runs"]]
    assert runs[runs.index((seen[2], "preempted")):] == [
        (seen[2], "preempted"), (seen[3], "COMPLETED")]
    first_resumed = [r for r in green_hpcdet.metrics(d["trials"][0]["id"])
                     if r["group"] == "training" and r["run_id"] == len(runs)][0]
    assert first_resumed["metrics"]["resumed_from"] == int(seen[4]) > 0


def test_a_missing_partition_and_runtime_fail_saying_what_to_change(
        broken: tuple[int, dict[str, dict[str, Any]]], broken_hpcdet: Hpcdet) -> None:
    code, found = broken
    assert code == 1
    assert found["partition"]["status"] == "fail"
    assert "'nope' does not exist here; the site has batch, debug" in found["partition"]["seen"]
    assert found["container runtime"]["status"] == "fail"
    assert found["container runtime"]["seen"] == "enroot not found on PATH"
    assert found["network"]["status"] == "fail"
    assert "Invalid partition name specified" in found["network"]["seen"]
    assert found["state directory"]["status"] == "fail"
    assert found["checkpoint storage"]["status"] == "skipped"
    assert found["preemption drill"]["status"] == "skipped"
    assert found["preemption drill"]["change"] == "run `hpcdet doctor --preemption`"
    assert not slurm_jobs_under(broken_hpcdet.root)
    # A failed run keeps its scripts for a look.
    [kept] = (broken_hpcdet.state / "doctor").iterdir()
    assert sorted(p.name for p in kept.iterdir()) == ["fs.sh", "net.sh", "net_probe.py"]


def test_doctor_leaves_nothing_behind(green: tuple[int, dict[str, dict[str, Any]]],
                                      green_hpcdet: Hpcdet) -> None:
    hpcdet = green_hpcdet
    assert not slurm_jobs_under(hpcdet.root)
    assert not list((hpcdet.state / "doctor").iterdir())  # all passed: the work dir is gone
    assert not [p for p in (hpcdet.state / "checkpoints").iterdir()
                if p.name.startswith(".hpcdet-doctor")]


@pytest.mark.exclusive
def test_a_partition_taken_down_fails_and_says_to_choose_another(
        slurm_cluster: SlurmTestCluster, tmp_path: Path) -> None:
    """As an administrator takes one down for maintenance (alone on the cluster: the others'
    jobs would wait on it)."""
    h = Hpcdet(tmp_path / "user", "slurm")
    subprocess.run(["scontrol", "update", "PartitionName=batch", "State=DOWN"], check=True)
    try:
        code, found = _doctor(h, "--partition", "batch", "--quick")
    finally:
        subprocess.run(["scontrol", "update", "PartitionName=batch", "State=UP"], check=True)
    assert code == 1
    part = found["partition"]
    assert part["status"] == "fail" and part["seen"].startswith("partition 'batch' is down"), part
    assert "choose another partition" in part["change"]
    assert found["network"]["status"] == "skipped"  # --quick: no job submitted
