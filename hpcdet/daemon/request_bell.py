"""The request bell: a FIFO in the daemon's local directory that a CLI rings when it has left a
request (the run bell, run_bell.py, is what runs ring).

The loop looks for request files every ``LOOP_SECONDS``, which on average kept a CLI waiting
half of that before its request was even read. A CLI on the daemon's host writes a byte into
this FIFO once its request file is in place, and the loop's wait ends at once; a CLI on
another login node cannot reach it (a FIFO is its host's kernel object) and is served by the
look as before. A lost or extra byte costs nothing but that wait or one empty look: the
request files stay what decides what is served.
"""

from __future__ import annotations

import contextlib
import os
import select
import time

from hpcdet.paths import StatePaths
from hpcdet.protocol.filedrop import wake_path


class RequestBell:
    """The daemon's end: made when the loop starts, waited on between its looks."""

    def __init__(self, paths: StatePaths) -> None:
        self.fd: int | None = None
        path = wake_path(paths)
        try:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # a killed daemon's
            os.mkfifo(path, 0o600)
            # Read and write: with no writer left a read-only FIFO would be readable for ever.
            self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        except OSError:
            self.fd = None  # a filesystem without FIFOs: the loop only looks, as before

    def wait(self, seconds: float) -> None:
        """Up to ``seconds``, or until a CLI rings; a ring is taken (the FIFO emptied)."""
        if self.fd is None:
            time.sleep(seconds)
            return
        readable, _, _ = select.select([self.fd], [], [], seconds)
        if readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(self.fd, 4096):
                    pass

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
