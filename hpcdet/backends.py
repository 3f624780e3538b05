"""The scheduler backends hpcdet knows, by name (psij-python's descriptors).

The config validates ``backend:`` against these names and ``hpcdet.schedulers`` imports the
class a name stands for only when it is asked for, so this list is the one place a new backend
is named. Shared layer: no backend code is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Backend:
    name: str
    cls: str  # "module:Class", imported lazily
    detect: str | None = None  # a client command whose presence on PATH means this backend


# "auto" tries them in this order and falls back to local.
BACKENDS: tuple[Backend, ...] = (
    Backend("slurm", "hpcdet.schedulers.slurm:SlurmScheduler", detect="sbatch"),
    Backend("pbs", "hpcdet.schedulers.pbs:PbsScheduler", detect="qsub"),
    Backend("local", "hpcdet.schedulers.local:LocalScheduler"),
)
NAMES: tuple[str, ...] = tuple(b.name for b in BACKENDS)
