"""The file-drop transport's daemon half: it serves the request files that clients
(``hpcdet.link.files``) leave in the shared state directory. The format both halves follow,
and why it is files, is ``hpcdet.protocol.filedrop``.
"""

from __future__ import annotations

import json
import logging
import os
import traceback
from pathlib import Path
from typing import Any, Callable

from hpcdet.errors import DiskFullError, HpcdetError, disk_full_cause
from hpcdet.paths import StatePaths
from hpcdet.protocol.filedrop import (
    TAKEN,
    answered,
    failed,
    gone_path,
    is_request,
    reply_path,
    taken_path,
)
from hpcdet.rundir.atomic import write_atomic

log = logging.getLogger(__name__)

# Carries out one request as it came over the wire (its "op" and "args", unchecked) and returns
# the reply's JSON (``hpcdet.daemon.commands.Commands.handle``).
Handler = Callable[[Any, Any], Any]

# Replies the daemon could not write yet, by request id; each is written as it was made.
_kept: dict[str, dict[str, Any]] = {}


def waiting(paths: StatePaths) -> bool:
    """Whether a request waits to be served (one directory read)."""
    try:
        names = os.listdir(paths.requests)
    except FileNotFoundError:
        return False
    return any(map(is_request, names))


def serve_pending(paths: StatePaths, handler: Handler) -> int:
    """Answer every waiting request in arrival order; returns how many.

    A request is carried out once at most: it is renamed to ``<id>.taken`` before it is acted
    on, and a reply that cannot be written (a full disk) is kept and written on a later call,
    unchanged, instead of the request being carried out again.
    """
    if not paths.requests.exists():
        return 0
    _deliver_kept(paths, handler)
    pending = sorted(p for p in paths.requests.glob("*.json") if is_request(p.name))
    for path in pending:
        rid = path.name[: -len(".json")]
        body = _body(path)
        if body is None:
            continue  # still being written by an old-style writer; next tick
        try:
            # A rename needs no free space; without it the request is not acted on.
            os.rename(path, taken_path(paths, rid))
        except OSError:
            continue  # withdrawn by the CLI, or retried next tick
        _deliver(paths, rid, _answer(handler, body))
    return len(pending)


def _body(path: Path) -> dict[str, Any] | None:
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def _answer(handler: Handler, body: dict[str, Any]) -> dict[str, Any]:
    try:
        return answered(handler(body.get("op"), body.get("args", {})))
    except DiskFullError as e:
        return failed(str(e))
    except Exception as e:
        if disk_full_cause(e) is not None:  # also under a StoreError, whose advice is wrong here
            where = getattr(e, "filename", None) or "the state directory or the database"
            return failed(str(DiskFullError(str(where), e)))
        if isinstance(e, HpcdetError):
            return failed(str(e))
        # A bug: keep serving, report it, keep the traceback in the log.
        log.error("request %s failed:\n%s", body.get("op"), traceback.format_exc())
        return failed(f"internal error in the daemon: {e!r} (see daemon.log)")


def _deliver(paths: StatePaths, rid: str, reply: dict[str, Any]) -> None:
    if not _abandoned(paths, rid, reply):
        try:
            write_atomic(reply_path(paths, rid), reply)
        except OSError as e:
            if rid not in _kept:
                log.warning("cannot write the reply to request %s yet (%s); kept until it can",
                            rid, e)
            _kept[rid] = reply
            return
        _abandoned(paths, rid, reply)  # the CLI may have given up while it was written
    _kept.pop(rid, None)
    taken_path(paths, rid).unlink(missing_ok=True)


def _abandoned(paths: StatePaths, rid: str, reply: dict[str, Any]) -> bool:
    """Whether the CLI stopped waiting; the reply is then logged, and its file removed."""
    mark = gone_path(paths, rid)
    if not mark.exists():
        return False
    if reply["ok"]:
        log.info("request %s, which its CLI stopped waiting for, answered: %s",
                 rid, reply["result"])
    else:
        log.warning("request %s, which its CLI stopped waiting for, failed: %s",
                    rid, reply["error"])
    reply_path(paths, rid).unlink(missing_ok=True)
    mark.unlink(missing_ok=True)
    return True


def _deliver_kept(paths: StatePaths, handler: Handler) -> None:
    for rid, reply in list(_kept.items()):
        _deliver(paths, rid, reply)
    for taken in paths.requests.glob(f"*{TAKEN}"):
        rid = taken.name[: -len(TAKEN)]
        if rid in _kept:
            continue
        # Taken by a daemon that stopped before it answered. A request that carries its id
        # finds what it did by it (the handler is idempotent by that id); acting again on
        # any other could do it twice.
        body = _body(taken)
        if body is not None and body.get("args", {}).get("request_id") == rid:
            _deliver(paths, rid, _answer(handler, body))
        else:
            _deliver(paths, rid, failed(
                "the hpcdet daemon stopped while carrying out this request; it may have taken "
                "effect: see `hpcdet experiment list` before trying again"))


__all__ = ["Handler", "serve_pending"]
