"""The chief's end of a run's event log, shared by every part of the Core API context."""

from __future__ import annotations

import atexit
import threading
from pathlib import Path
from typing import Any

from hpcdet.rundir.event_writer import EventWriter

_open_runs: set[Path] = set()
_open_runs_lock = threading.Lock()


class RunEvents:
    """The chief's end of a run's event log; one per run directory and process at a time.

    Args:
        writer: The run's event writer, or ``None`` on non-chief workers, which may not report.

    Raises:
        RuntimeError: Another open context already writes this run's event log.
    """

    def __init__(self, writer: EventWriter | None) -> None:
        self._writer = writer
        self._closed = False
        if writer is not None:
            with _open_runs_lock:
                if writer.path in _open_runs:
                    raise RuntimeError(
                        f"another core.init() context is open for {writer.path.parent}; close "
                        "it (leave its `with` block) before starting a new one"
                    )
                _open_runs.add(writer.path)
            # Buffered events must survive a script that never closes its context.
            atexit.register(writer.flush)

    @property
    def reporting(self) -> bool:
        """Whether this process may report: the chief of a run on a cluster."""
        return self._writer is not None

    def emit(self, type_: str, body: dict[str, Any], *, flush: bool = False) -> None:
        """Queue one event (and write the queue now if ``flush``).

        Raises:
            RuntimeError: On a non-chief worker, or if writing earlier events failed (the error
                of the background writer surfaces here, once).
        """
        writer = self._writer
        if writer is None:
            raise RuntimeError(
                "only the chief worker (rank 0) reports to hpcdet; guard reports and "
                "checkpoint uploads with `if core_context.distributed.rank == 0:`"
            )
        self._raise_write_error(writer)
        writer.emit(type_, body)
        if flush:
            writer.flush()

    def flush(self) -> None:
        """Write every buffered event now (nothing to do on non-chief workers).

        Raises:
            OSError: Writing failed; the events stay buffered for the next attempt.
        """
        if self._writer is not None:
            self._writer.flush()

    def start(self) -> None:
        """Start the background writer (events are written at least every second)."""
        if self._writer is not None:
            self._writer.start()

    def close(self) -> None:
        """Write every buffered event, stop the writer and free the run for another context."""
        writer = self._writer
        if writer is None or self._closed:
            return
        self._closed = True
        atexit.unregister(writer.flush)
        try:
            writer.close()
            self._raise_write_error(writer)
        finally:
            with _open_runs_lock:
                _open_runs.discard(writer.path)

    @staticmethod
    def _raise_write_error(writer: EventWriter) -> None:
        error, writer.error = writer.error, None
        if error is not None:
            raise RuntimeError(f"writing the event log {writer.path} failed: {error}") from error
