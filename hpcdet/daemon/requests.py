"""CLI -> daemon requests as files in the shared state directory: the daemon's half (the
CLI's is ``hpcdet.link.files``).

Files work from every login node that sees the shared filesystem, need no open port, and
survive a daemon restart: an unanswered request is answered by the next daemon.

``<id>.json`` (the request) becomes ``<id>.taken`` before the daemon acts on it and goes once
``<id>.reply.json`` is written, so a request is carried out once at most, also when its reply
cannot be written (a full disk) or the daemon dies in between. A CLI that stops waiting either
withdraws the request (removes ``<id>.json``, so it never runs) or, once it is taken, leaves
``<id>.gone``: its answer then goes to the daemon's log instead of a file nobody reads.
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
from hpcdet.rundir.atomic import write_atomic

log = logging.getLogger(__name__)

TAKEN = ".taken"
GONE = ".gone"
# Replies the daemon could not write yet, by request id; each is written as it was made.
_kept: dict[str, dict[str, Any]] = {}


def request_path(paths: StatePaths, rid: str) -> Path:
    return paths.requests / f"{rid}.json"


def reply_path(paths: StatePaths, rid: str) -> Path:
    return paths.requests / f"{rid}.reply.json"


def waiting(paths: StatePaths) -> bool:
    """Whether a request waits to be served (one directory read)."""
    try:
        names = os.listdir(paths.requests)
    except FileNotFoundError:
        return False
    return any(map(_is_request, names))


def _is_request(name: str) -> bool:
    """A request's file name (not a reply's, nor one still being written under a dot)."""
    return name.endswith(".json") and not name.endswith(".reply.json") and not name.startswith(".")


def serve_pending(paths: StatePaths, handler: Callable[[str, dict[str, Any]], Any]) -> int:
    """Answer every waiting request in arrival order; returns how many.

    A request is carried out once at most: it is renamed to ``<id>.taken`` before it is acted
    on, and a reply that cannot be written (a full disk) is kept and written on a later call,
    unchanged, instead of the request being carried out again.
    """
    if not paths.requests.exists():
        return 0
    _deliver_kept(paths, handler)
    pending = sorted(p for p in paths.requests.glob("*.json") if _is_request(p.name))
    for path in pending:
        rid = path.name[: -len(".json")]
        body = _body(path)
        if body is None:
            continue  # still being written by an old-style writer; next tick
        try:
            # A rename needs no free space; without it the request is not acted on.
            os.rename(path, paths.requests / f"{rid}{TAKEN}")
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


def _answer(handler: Callable[[str, dict[str, Any]], Any], body: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"ok": True, "result": handler(body["op"], body.get("args", {}))}
    except DiskFullError as e:
        return {"ok": False, "error": str(e)}
    except Exception as e:
        if disk_full_cause(e) is not None:  # also under a StoreError, whose advice is wrong here
            where = getattr(e, "filename", None) or "the state directory or the database"
            return {"ok": False, "error": str(DiskFullError(str(where), e))}
        if isinstance(e, HpcdetError):
            return {"ok": False, "error": str(e)}
        # A bug: keep serving, report it, keep the traceback in the log.
        log.error("request %s failed:\n%s", body.get("op"), traceback.format_exc())
        return {"ok": False, "error": f"internal error in the daemon: {e!r} (see daemon.log)"}


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
    (paths.requests / f"{rid}{TAKEN}").unlink(missing_ok=True)


def _abandoned(paths: StatePaths, rid: str, reply: dict[str, Any]) -> bool:
    """Whether the CLI stopped waiting; the reply is then logged, and its file removed."""
    mark = paths.requests / f"{rid}{GONE}"
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


def _deliver_kept(paths: StatePaths, handler: Callable[[str, dict[str, Any]], Any]) -> None:
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
            _deliver(paths, rid, {"ok": False, "error": (
                "the hpcdet daemon stopped while carrying out this request; it may have taken "
                "effect: see `hpcdet experiment list` before trying again")})


__all__ = ["GONE", "TAKEN", "reply_path", "request_path", "serve_pending"]
