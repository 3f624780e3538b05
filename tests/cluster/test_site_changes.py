"""Cluster changes seen by a running daemon (issue 42, item 5), on the real two-node Slurm."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import Hpcdet


@pytest.mark.exclusive
def test_a_partition_added_while_the_daemon_runs_is_laid_out_as_it_is(
    slurm_cluster: Any, slurm_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    """The daemon read the site before the partition existed. A 6-slot trial on it (4-CPU
    nodes) goes as 2 nodes x 3, not blind as 1 x 6, which sbatch refuses."""
    h = slurm_hpcdet
    h.run("daemon", "start")
    h.wait_for("a first poll", lambda: h.daemon_status().get("polls", 0) >= 1)
    subprocess.run(["scontrol", "create", "PartitionName=late", "Nodes=node[1-2]",
                    "MaxTime=INFINITE", "State=UP"], check=True, capture_output=True)
    try:
        ctx = h.mkdir(tmp_path / "ctx")
        cfg = tmp_path / "late.yaml"
        cfg.write_text("name: late\n"
                       "entrypoint: echo partition $SLURM_JOB_PARTITION nodes"
                       " $SLURM_JOB_NUM_NODES\n"
                       "searcher: {name: single, metric: loss, max_length: 1}\n"
                       "resources: {resource_pool: late, slots_per_trial: 6}\n"
                       "max_restarts: 0\n")
        exp = h.create(cfg, ctx)
        h.wait_state(exp, {"COMPLETED"}, timeout=300)
        logs = h.run("t", "logs", str(h.describe(exp)["trials"][0]["id"])).stdout
        assert "partition late nodes 2" in logs, logs
    finally:
        subprocess.run(["scontrol", "delete", "PartitionName=late"], check=False,
                       capture_output=True)
