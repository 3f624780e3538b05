"""The file-drop transport's client half: requests as files in the shared state directory
(the format is ``hpcdet.protocol.filedrop``; the daemon serves them in
``hpcdet.daemon.requests``). It works from every login node that sees the shared filesystem
and needs no open port."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any, Callable

from hpcdet.errors import DaemonError, DiskFullError, HpcdetError, disk_full_cause
from hpcdet.paths import StatePaths
from hpcdet.protocol.calls import call, new_request_id, withdraw
from hpcdet.protocol.filedrop import gone_path, reply_path, taken_path
from hpcdet.protocol.messages import Create, Request, encode
from hpcdet.rundir.atomic import read_json


class FileTransport:
    """Requests to the daemon of the state directory ``paths``, started when it runs nowhere."""

    def __init__(self, paths: StatePaths) -> None:
        self.paths = paths

    def send(self, request: Request[Any], request_id: str | None = None) -> object:
        op, args = encode(request)
        return call(self.paths, op, args, request_id=request_id)

    def send_with_context(self, take: Callable[[Path], None],
                          request: Callable[[str, Path], Create],
                          request_id: str | None = None) -> object:
        """The snapshot goes into the request area, where the daemon moves it into the
        experiment; a create given up on (a timeout, Ctrl-C) is withdrawn or left to the
        daemon, never half done (``give_up``)."""
        rid = request_id or new_request_id()
        # Its own name even for a request id sent again, whose first snapshot may be there.
        staging = self.paths.requests / f"{rid}-{uuid.uuid4().hex[:8]}.context"
        try:
            take(staging)
            return self.send(request(rid, staging), request_id=rid)
        except BaseException as e:
            outcome = give_up(self.paths, rid, staging, e)
            if outcome is e:
                raise
            if isinstance(outcome, BaseException):
                raise outcome from e
            return outcome  # answered as the CLI gave up


def taken(paths: StatePaths, rid: str) -> bool:
    """Whether the daemon took the request: it carries it out, answered yet or not."""
    # The taken mark first: the daemon writes the reply before it drops the mark.
    return taken_path(paths, rid).exists() or reply_path(paths, rid).exists()


def abandon(paths: StatePaths, rid: str) -> dict[str, Any] | None:
    """Stop waiting for a request the daemon took; returns its reply when it came meanwhile."""
    mark = gone_path(paths, rid)
    try:
        mark.touch()
    except OSError:
        return None  # a full disk: the reply file stays, as it did before
    path = reply_path(paths, rid)
    reply: dict[str, Any] | None = read_json(path)
    if reply is not None:
        path.unlink(missing_ok=True)
        mark.unlink(missing_ok=True)
    return reply


def give_up(
    p: StatePaths, rid: str, staging: Path, e: BaseException
) -> BaseException | dict[str, Any]:
    """What a create that ended without an answer raises, or the daemon's result when it came
    meanwhile. The snapshot is removed only when the daemon never acts on the request: once
    taken, it is the daemon's to move into the experiment or remove."""
    withdrawn = withdraw(p, rid)
    if not withdrawn and taken(p, rid):
        reply = abandon(p, rid)
        if reply is not None:
            return reply["result"] if reply["ok"] else HpcdetError(reply["error"])
        if not isinstance(e, DaemonError):
            return e
        return DaemonError(
            "the hpcdet daemon took the request but has not answered yet; it keeps the "
            "context and creates the experiment, or logs why not in daemon.log. See "
            "`hpcdet experiment list` in a while, and `hpcdet daemon status`.")
    shutil.rmtree(staging, ignore_errors=True)
    if withdrawn and isinstance(e, DaemonError):
        return DaemonError("the hpcdet daemon did not take the request in time; it was "
                           "withdrawn and no experiment was created. See `hpcdet daemon "
                           "status`.")
    if isinstance(e, OSError) and disk_full_cause(e) is not None:
        return DiskFullError(f"the request and context snapshot in {p.requests}", e,
                             "experiment not created: ")
    return e
