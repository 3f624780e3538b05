"""What launcher tests share: a harness-written cluster info record and a trial's environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hpcdet.launch._launch import NodeLayout
from hpcdet.rundir.spec import CLUSTER_INFO_ENV, ClusterInfoRecord

REPO = Path(__file__).resolve().parents[3]
PY = sys.executable


def write_info(
    tmp: Path, addrs: list[str] | None = None, rank: int = 0, slots: int = 2
) -> Path:
    """Write the cluster info record of node ``rank`` as the harness would; its path."""
    path = tmp / "nodes" / f"{rank}.json"
    ClusterInfoRecord(
        spec={"run_dir": str(tmp / "run")},
        container_addrs=addrs or ["127.0.0.1"],
        container_rank=rank,
        slot_ids=list(range(slots)),
        agent_id=f"node{rank + 1}",
        allocation_id="7.1",
        task_id="3.7",
    ).save(path)
    return path


def make_layout(
    addrs: tuple[str, ...] = ("127.0.0.1",), rank: int = 0, slots: int = 2,
    run_dir: str = "/runs/7/1",
) -> NodeLayout:
    return NodeLayout(
        addrs=addrs, node_rank=rank, slots_per_node=slots, allocation_id="7.1", run_dir=run_dir
    )


def trial_env(info: Path | None, **extra: str) -> dict[str, str]:
    """This process's environment as a trial's (shim importable, no Slurm job variables)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.pop(CLUSTER_INFO_ENV, None)
    shim = str(REPO / "hpcdet" / "shim")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (shim, env.get("PYTHONPATH", "")) if p)
    if info is not None:
        env[CLUSTER_INFO_ENV] = str(info)
    env.update(extra)
    return env
