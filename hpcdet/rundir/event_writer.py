"""Writing a run's event log, on the trial side: events buffered, then appended whole lines at
a time (``hpcdet.rundir.atomic``), metric reports encoded by ``hpcdet.rundir.metric_codec``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcdet.rundir.atomic import append_whole_lines
from hpcdet.rundir.events import event_batches
from hpcdet.rundir.metric_codec import encode_lines

log = logging.getLogger(__name__)

# Events the daemon reads only at its sweeps of every live run (training metrics, progress:
# all but what it decides on) wait in a trial's writer up to this long. The daemon's sweeps
# come every second with a few live runs and every ~25 s with a thousand; each flush is a line
# per metric group the daemon reads and stores, and lines, not reports, are most of what its
# reading costs. A trial killed outright loses at most this much of them: steps after its last
# checkpoint, which its restart reports again.
HOLD_SECONDS = 5.0
# ... and no more than this many, whatever their age.
MAX_HELD = 10_000


class EventWriter:
    """Buffered, thread-safe appender of a run's event log.

    ``emit`` only appends to a list (microseconds); a background thread writes the buffer
    every ``interval`` seconds if it holds an event the daemon decides on (``decisive``, which
    also rings ``bell``), and otherwise once its oldest event is ``hold`` seconds old
    (``due``); ``flush`` writes it at once (checkpoints, exit).
    """

    def __init__(self, path: Path, interval: float = 1.0, bell: Path | None = None,
                 hold: float = HOLD_SECONDS) -> None:
        self.path = path
        self.interval = interval
        self.hold = hold
        self.bell = bell  # rung after a write of what the daemon decides on
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self._since = 0.0  # when the oldest pending event was emitted (monotonic)
        self._decisive = False  # whether a pending event is
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._seq = _last_seq(path)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="hpcdet-events", daemon=True)
            self._thread.start()

    def emit(self, type_: str, body: dict[str, Any]) -> None:
        with self._lock:
            if not self._pending:
                self._since = time.monotonic()
            self._pending.append((type_, body))
            self._decisive = self._decisive or decisive(type_, body)

    def due(self, now: float) -> bool:
        """Whether the background thread writes the buffer at monotonic time ``now``."""
        return bool(self._pending) and (self._decisive or now - self._since >= self.hold
                                        or len(self._pending) >= MAX_HELD)

    def flush(self) -> None:
        with self._io_lock:
            with self._lock:
                pending, self._pending = self._pending, []
                decided, self._decisive = self._decisive, False
            if not pending:
                return
            lines = encode_lines(pending, self._seq + 1, time.time())
            seq = self._seq + len(lines)
            try:
                append_whole_lines(self.path, lines)
            except BaseException:
                # Keep the batch for the next flush; none of it stayed in the file.
                with self._lock:
                    self._pending[:0] = pending
                    self._decisive = self._decisive or decided
                raise
            self._seq = seq
            if self.bell is not None and decided:
                ring(self.bell)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if self.due(time.monotonic()):
                    self.flush()
            except BaseException as e:  # surfaced on the next report, as Determined does
                self.error = e



# What the daemon decides on as soon as it is written: the searcher's input (validations, a
# completed operation), a trial's own end, and checkpoints (preemption, retention). Training
# metrics, progress and the like wait for its next sweep of every live run.
_DECISIVE = frozenset({"searcher_completed", "early_exit", "preempt_ack", "checkpoint"})


def decisive(type_: str, body: Mapping[str, Any]) -> bool:
    """Whether an event is worth ringing the daemon's bell for."""
    return type_ in _DECISIVE or (type_ == "metrics" and body.get("group") == "validation")


def ring(bell: Path) -> None:
    """Ask the daemon to look at the run of ``bell`` (``layout.bell``) at its next tick.

    A ring that fails (no bell directory: a run tree of an older hpcdet) costs only the wait
    for the daemon's next sweep, which reads every live run anyway.
    """
    try:
        os.close(os.open(bell, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    except OSError as e:
        log.debug("could not ring %s: %s", bell, e)



def _last_seq(path: Path) -> int:
    last = 0
    for batch in event_batches(path, 0):
        last = last if batch.last_seq is None else batch.last_seq
    return last


