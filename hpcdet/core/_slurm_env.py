"""A Slurm task's place in its job step, read from the variables ``srun`` sets (pure functions)."""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

_MPI_RANK_VARS = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK")


@dataclass(frozen=True)
class SlurmLayout:
    """Where one task of a Slurm job step runs; names follow ``DistributedContext``."""

    rank: int
    size: int
    local_rank: int
    local_size: int
    cross_rank: int
    cross_size: int
    nodelist: str
    job_id: str
    step_id: str

    def port_offset(self) -> int:
        """An offset in [0, 1000) that differs between most concurrent steps on one node."""
        return zlib.crc32(f"{self.job_id}.{self.step_id}".encode()) % 1000


def _first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        if env.get(name):
            return env[name]
    return None


def slurm_layout(env: Mapping[str, str]) -> SlurmLayout:
    """Read the task's layout, preferring the step's variables over the job's.

    Raises:
        ValueError: A variable is missing or malformed; the message says to start with srun.
    """
    wanted = {
        "rank": ("SLURM_PROCID",),
        "size": ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"),
        "local_rank": ("SLURM_LOCALID",),
        "cross_rank": ("SLURM_NODEID",),
        "cross_size": ("SLURM_STEP_NUM_NODES", "SLURM_NNODES"),
        "tasks_per_node": (
            "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"
        ),
    }
    raw = {key: _first(env, *names) for key, names in wanted.items()}
    missing = [wanted[key][0] for key, value in raw.items() if value is None]
    if missing:
        raise ValueError(
            f"from_slurm() needs {', '.join(missing)} in the environment; start the workers "
            "with srun, which sets them"
        )
    values: dict[str, int] = {}
    for key in ("rank", "size", "local_rank", "cross_rank", "cross_size"):
        try:
            values[key] = int(raw[key] or "")
        except ValueError:
            raise ValueError(f"{wanted[key][0]}={raw[key]!r} is not an integer") from None
    per_node = parse_tasks_per_node(raw["tasks_per_node"] or "")
    if len(per_node) == 1:  # SLURM_NTASKS_PER_NODE: one count for every node
        per_node *= values["cross_size"]
    if not 0 <= values["cross_rank"] < len(per_node):
        raise ValueError(
            f"SLURM_NODEID={values['cross_rank']} has no entry in the tasks-per-node list "
            f"{raw['tasks_per_node']!r}"
        )
    return SlurmLayout(
        local_size=per_node[values["cross_rank"]],
        nodelist=_first(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
        or "",
        job_id=_first(env, "SLURM_JOB_ID", "SLURM_JOBID") or "",
        step_id=_first(env, "SLURM_STEP_ID", "SLURM_STEPID") or "",
        **values,
    )


def parse_tasks_per_node(value: str) -> list[int]:
    """Expand Slurm's compressed tasks-per-node list: ``"2(x3),1"`` is ``[2, 2, 2, 1]``.

    Raises:
        ValueError: ``value`` is not in that format.
    """
    counts: list[int] = []
    for item in value.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", item)
        if match is None:
            raise ValueError(f"cannot read tasks per node from {value!r}")
        counts += [int(match[1])] * int(match[2] or 1)
    return counts


def first_hostname(nodelist: str) -> str:
    """The first host of a Slurm hostlist: ``"gpu[08-10,12],cpu1"`` gives ``"gpu08"``.

    Raises:
        ValueError: ``nodelist`` is empty or malformed.
    """
    match = re.match(r"([^,\[]+)(?:\[([^-,\]]+))?", nodelist.strip())
    if match is None:
        raise ValueError(f"cannot read a host name from the node list {nodelist!r}")
    return match[1] + (match[2] or "")


def is_mpi_process(env: Mapping[str, str]) -> bool:
    """Whether a process manager started this process as an MPI rank (PMI, PMIx, Open MPI)."""
    return any(name in env for name in _MPI_RANK_VARS)
