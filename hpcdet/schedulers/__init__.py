"""Scheduler backends, found by name (no if/elif over backends)."""

from __future__ import annotations

import shutil
from typing import Any

from hpcdet.schedulers.base import JobRequest, JobStatus, Scheduler
from hpcdet.schedulers.local import LocalScheduler
from hpcdet.schedulers.slurm import SlurmScheduler
from hpcdet.states import JobState

SCHEDULERS: dict[str, type[Scheduler]] = {
    "slurm": SlurmScheduler,
    "local": LocalScheduler,
}

# What "auto" looks for, in order: the first client command found on PATH picks the backend.
_DETECT = [("sbatch", "slurm"), ("qsub", "pbs")]


def detect_backend() -> str:
    for command, backend in _DETECT:
        if shutil.which(command) and backend in SCHEDULERS:
            return backend
    return "local"


def make_scheduler(name: str, settings: dict[str, Any]) -> Scheduler:
    if name == "auto":
        name = detect_backend()
    try:
        return SCHEDULERS[name](settings)
    except KeyError:
        from hpcdet.errors import ConfigError

        valid = ", ".join(sorted(SCHEDULERS))
        raise ConfigError([f"backend: unknown backend {name!r}; valid: auto, {valid}"],
                          "cluster config") from None


__all__ = ["SCHEDULERS", "JobRequest", "JobState", "JobStatus", "Scheduler", "detect_backend",
           "make_scheduler"]
