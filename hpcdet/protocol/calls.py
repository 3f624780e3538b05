"""One request to the daemon as files in the shared state directory, and its reply
(``hpcdet.protocol.filedrop``): what the daemon client (``hpcdet.link.files``) sends every
request with, and the views ask the database's copy with when the daemon runs on another host.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any, Callable

from hpcdet.errors import DaemonError, HpcdetError
from hpcdet.paths import StatePaths
from hpcdet.protocol import process
from hpcdet.protocol.filedrop import body, reply_path, request_path, ring, taken_path
from hpcdet.rundir.atomic import read_json, write_atomic


def call(
    paths: StatePaths, op: str, args: dict[str, Any], timeout: float | None = None,
    request_id: str | None = None,
) -> Any:
    """Send a request to the daemon, starting it first when it runs nowhere."""
    if timeout is None:
        timeout = float(os.environ.get("HPCDET_REQUEST_TIMEOUT", "120"))
    current = process.info(paths)
    if not current.alive:
        current = process.start(paths)
    silent = current.silent()
    if silent is not None:
        raise DaemonError(silent)
    where = f"host {current.record.get('host')}, pid {current.record.get('pid')}"
    rid = submit(paths, op, args, request_id)
    if current.here:
        ring(paths)
    try:
        return wait_reply(paths, rid, timeout, where,
                          None if current.here else lambda: process.info(paths).silent())
    except HpcdetError as e:
        other = current.other_version()
        if other is None or type(e) is not HpcdetError:
            raise
        raise HpcdetError(f"{e}\n({other})") from None


def new_request_id() -> str:
    return f"{time.time():.6f}-{uuid.uuid4().hex[:8]}"


def submit(paths: StatePaths, op: str, args: dict[str, Any], request_id: str | None = None) -> str:
    rid = request_id or new_request_id()
    write_atomic(request_path(paths, rid), body(op, args))
    return rid


# A woken daemon answers most requests within tens to hundreds of milliseconds, which the
# CLI's user waits through: for the first REPLY_SOON seconds the reply is looked for every
# REPLY_SOON_PAUSE (a look is one failed open, ~10 us), then every REPLY_PAUSE.
REPLY_SOON = 1.0
REPLY_SOON_PAUSE = 0.005
REPLY_PAUSE = 0.05
WATCH_SECONDS = 2.0


def wait_reply(paths: StatePaths, rid: str, timeout: float, where: str,
               silent: Callable[[], str | None] | None = None) -> Any:
    """``silent``: for a daemon on another host, why it may never answer (its host is not
    heard from), looked at every WATCH_SECONDS; the request is withdrawn then."""
    path = reply_path(paths, rid)
    started = time.monotonic()
    deadline = started + timeout
    watched = started
    while time.monotonic() < deadline:
        if silent is not None and time.monotonic() - watched >= WATCH_SECONDS:
            watched = time.monotonic()
            why = silent()
            if why is not None and withdraw(paths, rid):
                raise DaemonError(why)
        reply = read_json(path)
        if reply is not None:
            path.unlink(missing_ok=True)
            if reply["ok"]:
                return reply["result"]
            raise HpcdetError(reply["error"])
        soon = time.monotonic() - started < REPLY_SOON
        time.sleep(REPLY_SOON_PAUSE if soon else REPLY_PAUSE)
    if taken_path(paths, rid).exists():
        raise DaemonError(
            f"the hpcdet daemon ({where}) took the request but did not answer within "
            f"{timeout:.0f} s (a full disk keeps it from writing its answer). The request is "
            "carried out once at most: see `hpcdet experiment list` and `hpcdet daemon status`."
        )
    raise DaemonError(
        f"the hpcdet daemon ({where}) did not answer within {timeout:.0f} s. "
        "See `hpcdet daemon status`; the request stays queued and will be answered when the "
        "daemon runs again."
    )


def withdraw(paths: StatePaths, rid: str) -> bool:
    """Take back a request the daemon has not taken yet; True when it was (so it never runs)."""
    try:
        request_path(paths, rid).unlink()
    except FileNotFoundError:
        return False
    return True
