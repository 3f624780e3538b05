"""The test cluster behaves like two real nodes: one job spans both, with distinct addresses."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.cluster.conftest import SlurmTestCluster

# One line per node: "<SLURMD_NODENAME> <hostname> <IPv4 addresses>".
_REPORT_NODE = "echo NODE $SLURMD_NODENAME $(hostname) $(hostname -I)"


def test_two_node_job_runs_on_both_nodes(slurm_cluster: SlurmTestCluster, tmp_path: Path) -> None:
    output = tmp_path / "job.out"
    proc = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--wait",
            f"--partition={slurm_cluster.default_partition}",
            "--nodes=2",
            "--ntasks-per-node=1",
            "--time=2",
            f"--chdir={tmp_path}",
            f"--output={output}",
            "--wrap",
            f"srun bash -c '{_REPORT_NODE}'",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    job_output = output.read_text() if output.exists() else "<no output file>"
    assert proc.returncode == 0, f"sbatch: {proc.stdout}{proc.stderr}\njob output:\n{job_output}"
    assert proc.stdout.strip().split(";")[0].isdigit()

    rows = [line.split()[1:] for line in job_output.splitlines() if line.startswith("NODE ")]
    names = {row[0] for row in rows}
    hostnames = {row[1] for row in rows}
    addresses = [row[2] for row in rows]
    assert names == set(slurm_cluster.nodes), job_output
    assert hostnames == set(slurm_cluster.nodes), job_output
    assert len(addresses) == 2 and addresses[0] != addresses[1], job_output
    assert set(addresses) == set(slurm_cluster.node_addresses), job_output
