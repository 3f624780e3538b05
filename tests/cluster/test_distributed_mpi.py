"""Collectives across the two nodes of the real Slurm test cluster: over MPI and over TCP.

One two-node job (2 tasks a node) runs a step per way of building the context; each step
starts the workers with ``srun``, and every rank prints its layout and the results of every
collective as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.cluster.conftest import require_module

if TYPE_CHECKING:
    from tests.cluster.conftest import SlurmTestCluster

REPO = Path(__file__).resolve().parents[2]

_WORKER = """
import json, socket, sys
from hpcdet import core


mode = sys.argv[1]
D = core.DistributedContext
d = D.from_mpi4py() if mode == "mpi4py" else D.from_slurm()
t = d._transport
print("RESULT " + json.dumps({
    "mode": mode,
    "layout": [d.rank, d.size, d.local_rank, d.local_size, d.cross_rank, d.cross_size],
    "host": socket.gethostname(),
    "transport": type(t).__name__,
    "chief": getattr(t, "address", "").rsplit(":", 1)[0],
    "allgather": d.allgather(d.rank * 10),
    "gather": d.gather(d.rank),
    "broadcast": d.broadcast("from rank %d" % d.rank),
    "allgather_local": d.allgather_local(d.rank),
    "gather_local": d.gather_local(d.rank),
    "broadcast_local": d.broadcast_local(d.rank),
}), flush=True)
d.close()
"""


# One job for both tests: ``sbatch --wait`` polls every few seconds, which dominates the time.
_STEPS = {
    "mpi4py": 'srun --mpi=pmi2 "$PY" "$W" mpi4py',
    "slurm-pmi2": 'srun --mpi=pmi2 "$PY" "$W" slurm-pmi2',
    # from_slurm() finds the chief on the step's first node by itself ...
    "slurm-auto": 'srun "$PY" "$W" slurm-auto',
    # ... or takes the address the batch script resolved, as a launcher would pass it.
    "slurm-env": 'first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)\n'
    # ahostsv4: `getent hosts` asks DNS for IPv6 first, which times out inside the nodes.
    'DET_CHIEF_IP=$(getent ahostsv4 "$first" | head -1 | cut -d" " -f1) srun "$PY" "$W" slurm-env',
}


@dataclass
class JobResult:
    rows: list[dict[str, Any]]
    step_status: dict[str, str]
    output: str


@pytest.fixture(scope="module")
def job(slurm_cluster: SlurmTestCluster, tmp_path_factory: pytest.TempPathFactory) -> JobResult:
    tmp_path = tmp_path_factory.mktemp("collectives")
    worker = tmp_path / "worker.py"
    worker.write_text(_WORKER)
    steps = "".join(f'{cmd}\necho "STEP {mode} $?"\n' for mode, cmd in _STEPS.items())
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\nPY={sys.executable}\nW={worker}\n{steps}")
    output = tmp_path / "job.out"
    proc = subprocess.run(
        [
            "sbatch", "--parsable", "--wait", f"--partition={slurm_cluster.default_partition}",
            "--nodes=2", "--ntasks-per-node=2", "--time=2", f"--chdir={tmp_path}",
            f"--output={output}", f"--export=ALL,PYTHONPATH={REPO}", str(script),
        ],
        capture_output=True, text=True, timeout=180, check=False,
    )
    job_output = output.read_text() if output.exists() else "<no output file>"
    assert proc.returncode == 0, f"sbatch: {proc.stdout}{proc.stderr}\njob output:\n{job_output}"
    lines = job_output.splitlines()
    return JobResult(
        rows=[json.loads(line[len("RESULT "):]) for line in lines if line.startswith("RESULT ")],
        step_status=dict(line.split()[1:3] for line in lines if line.startswith("STEP ")),
        output=job_output,
    )


def _check(job: JobResult, mode: str, cluster: SlurmTestCluster) -> list[dict[str, Any]]:
    assert job.step_status.get(mode) == "0", job.output
    mine = sorted((r for r in job.rows if r["mode"] == mode), key=lambda r: r["layout"][0])
    assert [r["layout"] for r in mine] == [
        [rank, 4, rank % 2, 2, rank // 2, 2] for rank in range(4)
    ], job.output
    assert [r["host"] for r in mine] == [cluster.nodes[0]] * 2 + [cluster.nodes[1]] * 2
    for r in mine:
        rank, node = r["layout"][0], r["layout"][4]
        first = 2 * node
        assert r["allgather"] == [0, 10, 20, 30]
        assert r["gather"] == ([0, 1, 2, 3] if rank == 0 else None)
        assert r["broadcast"] == "from rank 0"
        assert r["allgather_local"] == [first, first + 1]
        assert r["gather_local"] == ([first, first + 1] if rank == first else None)
        assert r["broadcast_local"] == first
    return mine


def test_mpi_collectives_across_two_nodes(slurm_cluster: SlurmTestCluster, job: JobResult) -> None:
    require_module("mpi4py")
    for mode in ("mpi4py", "slurm-pmi2"):
        assert {r["transport"] for r in _check(job, mode, slurm_cluster)} == {"MpiTransport"}


def test_tcp_collectives_across_two_nodes(slurm_cluster: SlurmTestCluster, job: JobResult) -> None:
    for mode in ("slurm-auto", "slurm-env"):
        mine = _check(job, mode, slurm_cluster)
        assert {r["transport"] for r in mine} == {"TcpTransport"}
        assert {r["chief"] for r in mine} == {slurm_cluster.node_addresses[0]}
