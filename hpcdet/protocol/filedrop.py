"""The file-drop transport's format, which both its halves follow: the client's
(``hpcdet.link.files``) and the daemon's (``hpcdet.daemon.requests``).

Requests are files in the shared state directory: they work from every login node that sees the
shared filesystem, need no open port, and survive a daemon restart (an unanswered request is
answered by the next daemon).

``<id>.json`` (the request, ``{"op", "args", "pid"}``) becomes ``<id>.taken`` before the daemon
acts on it and goes once ``<id>.reply.json`` (``{"ok": true, "result"}`` or ``{"ok": false,
"error"}``) is written, so a request is carried out once at most, also when its reply cannot be
written (a full disk) or the daemon dies in between. A client that stops waiting either
withdraws the request (removes ``<id>.json``, so it never runs) or, once it is taken, leaves
``<id>.gone``: its answer then goes to the daemon's log instead of a file nobody reads.

A client on the daemon's host also rings its doorbell, a FIFO in the daemon's local directory
(``wake_path``), so that the request is looked for at once.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from hpcdet.paths import StatePaths

TAKEN = ".taken"
GONE = ".gone"
WAKE_FILE = "wake"


# A request id names files in the request area (``<id>.json``, ``<id>.reply.json``): a
# caller's own (`create --request-id`) is held to this, with no dot to name another's file.
CALLER_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,79}")


def request_path(paths: StatePaths, rid: str) -> Path:
    return paths.requests / f"{rid}.json"


def reply_path(paths: StatePaths, rid: str) -> Path:
    return paths.requests / f"{rid}.reply.json"


def taken_path(paths: StatePaths, rid: str) -> Path:
    return paths.requests / f"{rid}{TAKEN}"


def gone_path(paths: StatePaths, rid: str) -> Path:
    return paths.requests / f"{rid}{GONE}"


def is_request(name: str) -> bool:
    """A request's file name (not a reply's, nor one still being written under a dot)."""
    return name.endswith(".json") and not name.endswith(".reply.json") and not name.startswith(".")


def body(op: str, args: dict[str, Any]) -> dict[str, Any]:
    """A request file's content."""
    return {"op": op, "args": args, "pid": os.getpid()}


def answered(result: object) -> dict[str, Any]:
    return {"ok": True, "result": result}


def failed(error: str) -> dict[str, Any]:
    return {"ok": False, "error": error}


def wake_path(paths: StatePaths) -> Path:
    return paths.local_dir() / WAKE_FILE


def ring(paths: StatePaths) -> None:
    """Wake the daemon on this host after writing a request; a daemon that does not listen
    (stopped, older, or its FIFO gone) is simply not woken."""
    try:
        fd = os.open(wake_path(paths), os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:  # ENXIO: no daemon has it open; ENOENT: none made it
        return
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):  # never a byte into a file put in its place
            os.write(fd, b"\0")
    except OSError:  # EAGAIN: full of rings the daemon has yet to take
        pass
    finally:
        os.close(fd)
