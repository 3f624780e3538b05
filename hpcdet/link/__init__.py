"""How the CLI (and later an SDK) talks to the user's daemon: one typed interface, one
implementation per transport. Today's transport is request files in the shared state
directory (``files``); another (SSH from a laptop) goes beside it behind ``connect``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from hpcdet.paths import StatePaths


@dataclass(frozen=True)
class Created:
    """A new experiment: its id, its first trials, and what the user should know."""

    experiment_id: int
    trial_ids: list[int]
    warning: str = ""
    # The image its trials run in (hpcdet.containers.ContainerSpec as a dict), which the CLI
    # converts on the login node while the jobs wait for it.
    image: dict[str, Any] | None = None
    # The holder of the image's pull lock the daemon took for the CLI (hpcdet.images.reserve).
    image_reserved: str = ""

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> Created:
        return cls(int(reply["experiment_id"]), [int(t) for t in reply.get("trial_ids", [])],
                   str(reply.get("warning") or ""), reply.get("image"),
                   str(reply.get("image_reserved") or ""))


@dataclass(frozen=True)
class JobUpdate:
    """`hpcdet job update`: one field of one job (an experiment), e.g. priority 10."""

    experiment_id: int
    field: str  # priority, weight, resource_pool, ahead_of, behind_of
    value: object


class DaemonClient(Protocol):
    def ping(self) -> dict[str, Any]: ...

    def shutdown(self) -> str: ...

    def create(self, config: dict[str, Any], context: Path,
               on_snapshot: Callable[[int, int], None] | None = None,
               warn: Callable[[str], None] | None = None, paused: bool = False,
               includes: Sequence[Path] = (), convert_image: bool = False) -> Created:
        """Snapshot ``context`` and each of ``includes`` (a file or directory, put at the
        context's top under its own name; ``on_snapshot(files, bytes)`` once they are taken)
        and create the experiment of the validated ``config``, ``paused`` if asked.
        ``convert_image``: the caller converts the trials' image next (``Created.image``),
        so the jobs wait for it."""
        ...

    def pause(self, exp_id: int) -> str: ...

    def activate(self, exp_id: int) -> str: ...

    def cancel(self, exp_id: int) -> str: ...

    def kill(self, exp_id: int) -> str: ...

    def continue_experiment(self, exp_id: int, config: dict[str, Any] | None = None) -> str: ...

    def continue_trial(self, trial_id: int) -> Created: ...

    def delete_checkpoint(self, uuid: str) -> str: ...

    def set_experiment(self, exp_id: int, field: str, value: Any) -> str:
        """``field``: name, description, labels_add, labels_remove or archived."""
        ...

    def delete_experiment(self, exp_id: int) -> str: ...

    def kill_trial(self, trial_id: int) -> str: ...

    def update_jobs(self, updates: list[JobUpdate]) -> str: ...


def connect(paths: StatePaths) -> DaemonClient:
    """The client for the state directory ``paths`` (the daemon is started when needed)."""
    from hpcdet.link.files import FileClient

    return FileClient(paths)
