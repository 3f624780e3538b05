"""A run's control file (``control.json``), daemon -> trial: what the run should do now.

The daemon writes it (``write_control``) whenever what it says changes, replacing it whole;
the trial side reads it (``read_control``) after a ``FileWatch`` saw it change: the
preemption watcher, the searcher's operations and the experiment's best validation. The
file is a JSON object; keys a reader does not know are ignored and missing ones take their
defaults, so files written by an older or newer hpcdet read alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcdet.rundir.atomic import write_atomic

# What a request to stop says when the daemon gave no reason.
DEFAULT_REASON = "the hpcdet daemon requested it"


class ControlFileError(ValueError):
    """The control file is JSON but breaks the protocol (a field of the wrong type)."""


@dataclass(frozen=True)
class Control:
    """What the daemon asks of a run.

    ``preempt``: checkpoint and exit, for ``reason``. ``best_validation``: the experiment's
    best searcher metric so far, if any. ``ops``: the absolute lengths of this run's searcher
    operations in order, None when the daemon does not feed them (the trial's config gives
    them); ``decided``: how many of this run's ``searcher_completed`` events the daemon has
    processed (before its i-th operation the chief waits until ``decided >= i``).
    """

    preempt: bool = False
    reason: str = ""
    best_validation: float | None = None
    ops: tuple[int, ...] | None = None
    decided: int = 0

    @property
    def stop_reason(self) -> str | None:
        """Why the run should stop now, or None if it should carry on."""
        return (self.reason or DEFAULT_REASON) if self.preempt else None

    def to_json(self) -> dict[str, Any]:
        """The file's object: ``ops`` and ``decided`` only when the daemon feeds operations."""
        found: dict[str, Any] = {"preempt": self.preempt, "reason": self.reason,
                                 "best_validation": self.best_validation}
        if self.ops is not None:
            found.update(ops=list(self.ops), decided=self.decided)
        return found

    @classmethod
    def from_json(cls, obj: Any, source: str = "control.json") -> Control:
        """The record of a decoded control file.

        Raises:
            ControlFileError: One of its fields has the wrong type (named, with what it holds).
            ValueError: ``obj`` is not an object.
        """
        if not isinstance(obj, dict):  # not a control file at all: as if unreadable
            raise ValueError(f"{source}: not a JSON object: {obj!r}")
        preempt, reason = obj.get("preempt", False), obj.get("reason") or ""
        best, ops, decided = obj.get("best_validation"), obj.get("ops"), obj.get("decided", 0)
        if not isinstance(preempt, bool):
            raise ControlFileError(f"{source}: 'preempt' must be true or false, not {preempt!r}")
        if not isinstance(reason, str):
            raise ControlFileError(f"{source}: 'reason' must be a string, not {reason!r}")
        if best is not None and not (_is_int(best) or isinstance(best, float)):
            raise ControlFileError(
                f"{source}: 'best_validation' must be a number or null, not {best!r}")
        if ops is not None and not (isinstance(ops, list) and all(map(_is_int, ops))):
            raise ControlFileError(f"{source}: 'ops' must be a list of integers, not {ops!r}")
        if not _is_int(decided):
            raise ControlFileError(f"{source}: 'decided' must be an integer, not {decided!r}")
        return cls(preempt, reason, None if best is None else float(best),
                   None if ops is None else tuple(ops), decided)


def write_control(path: Path, control: Control) -> None:
    """Replace the run's control file with ``control`` (atomically: a reader on any node sees
    the old file or the new one)."""
    write_atomic(path, control.to_json())


def read_control(path: Path) -> Control:
    """The run's control file as the daemon last wrote it; ``Control()`` if it has not.

    Raises:
        ControlFileError: It breaks the protocol (``Control.from_json``).
        ValueError: It is not a JSON object (a reader keeps what it read before and reads
            again: a shared filesystem may show a file being replaced).
        OSError: It could not be read.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        return Control()
    return Control.from_json(json.loads(text), str(path))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
