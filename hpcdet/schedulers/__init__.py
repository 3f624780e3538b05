"""Scheduler backends, found by name (no if/elif over backends; the names are
``hpcdet.backends``)."""

from __future__ import annotations

import importlib
import shutil
from typing import Any

from hpcdet import backends
from hpcdet.errors import ConfigError
from hpcdet.schedulers.base import JobRequest, JobStatus, Scheduler
from hpcdet.states import JobState


def scheduler_class(name: str) -> type[Scheduler]:
    """The backend class of ``name``, imported now. Raises ConfigError for an unknown name."""
    for backend in backends.BACKENDS:
        if backend.name == name:
            module, _, cls = backend.cls.partition(":")
            found: type[Scheduler] = getattr(importlib.import_module(module), cls)
            return found
    valid = ", ".join(("auto", *backends.NAMES))
    raise ConfigError([f"backend: unknown backend {name!r}; valid: {valid}"], "cluster config")


def detect_backend() -> str:
    """What ``backend: auto`` means here: the first backend whose client command is on PATH."""
    for backend in backends.BACKENDS:
        if backend.detect and shutil.which(backend.detect):
            return backend.name
    return "local"


def make_scheduler(name: str, settings: dict[str, Any]) -> Scheduler:
    return scheduler_class(detect_backend() if name == "auto" else name)(settings)


__all__ = ["JobRequest", "JobState", "JobStatus", "Scheduler", "detect_backend",
           "make_scheduler", "scheduler_class"]
