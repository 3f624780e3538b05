"""The run bell: a run rings it (``hpcdet.rundir.layout.bell``) when it has written what
the daemon decides on (a validation, a completed operation, a checkpoint) or has ended, and
the loop looks at that run at its next tick instead of its next sweep of every live run.

A ring is an empty file in one directory, so that the loop's check is one directory read
however many runs live, and a ring works from any node that sees the run tree.
"""

from __future__ import annotations

import logging
import os

from hpcdet.paths import StatePaths
from hpcdet.rundir.layout import parse_ring

log = logging.getLogger(__name__)


class RunBell:
    def __init__(self, paths: StatePaths) -> None:
        self.dir = str(paths.bell)
        # Rings that cannot be removed (a directory a trial made by that name): each rang
        # once; otherwise the loop would tick on every look, or fail every tick.
        self.stuck: set[str] = set()

    def rung(self) -> bool:
        """Whether a run has rung since the last ``take`` (one directory read)."""
        return any(parse_ring(name) and name not in self.stuck for name in self._names())

    def take(self) -> set[tuple[int, int]]:
        """(trial, run) of every run that rang; each ring is removed before its run is looked
        at, so one that comes after the look stays for the next tick. Anything else in the
        directory is left alone: it rings nothing."""
        rung = set()
        for name in self._names():
            ids = parse_ring(name)
            if ids is None or name in self.stuck:
                continue
            try:
                os.unlink(f"{self.dir}/{name}")
            except FileNotFoundError:
                pass
            except OSError as e:
                log.warning("the bell's %s cannot be removed, so it rings no more: %s", name, e)
                self.stuck.add(name)
            rung.add((ids[1], ids[2]))
        return rung

    def _names(self) -> list[str]:
        try:
            return os.listdir(self.dir)
        except FileNotFoundError:
            return []
