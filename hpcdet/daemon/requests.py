"""CLI -> daemon requests as files in the shared state directory.

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
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, Callable

from hpcdet.errors import DaemonError, DiskFullError, HpcdetError, disk_full_cause
from hpcdet.exchange import read_json, write_atomic
from hpcdet.paths import StatePaths

log = logging.getLogger(__name__)

TAKEN = ".taken"
GONE = ".gone"
# Replies the daemon could not write yet, by request id; each is written as it was made.
_kept: dict[str, dict[str, Any]] = {}


def new_request_id() -> str:
    return f"{time.time():.6f}-{uuid.uuid4().hex[:8]}"


def submit(paths: StatePaths, op: str, args: dict[str, Any], request_id: str | None = None) -> str:
    rid = request_id or new_request_id()
    write_atomic(paths.requests / f"{rid}.json", {"op": op, "args": args, "pid": os.getpid()})
    return rid


def wait_reply(paths: StatePaths, rid: str, timeout: float, where: str) -> Any:
    reply_path = paths.requests / f"{rid}.reply.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = read_json(reply_path)
        if reply is not None:
            reply_path.unlink(missing_ok=True)
            if reply["ok"]:
                return reply["result"]
            raise HpcdetError(reply["error"])
        time.sleep(0.05)
    if (paths.requests / f"{rid}{TAKEN}").exists():
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
        (paths.requests / f"{rid}.json").unlink()
    except FileNotFoundError:
        return False
    return True


def taken(paths: StatePaths, rid: str) -> bool:
    """Whether the daemon took the request: it carries it out, answered yet or not."""
    # The taken mark first: the daemon writes the reply before it drops the mark.
    return (paths.requests / f"{rid}{TAKEN}").exists() or (
        paths.requests / f"{rid}.reply.json").exists()


def abandon(paths: StatePaths, rid: str) -> dict[str, Any] | None:
    """Stop waiting for a request the daemon took; returns its reply when it came meanwhile."""
    mark = paths.requests / f"{rid}{GONE}"
    try:
        mark.touch()
    except OSError:
        return None  # a full disk: the reply file stays, as it did before
    reply_path = paths.requests / f"{rid}.reply.json"
    reply: dict[str, Any] | None = read_json(reply_path)
    if reply is not None:
        reply_path.unlink(missing_ok=True)
        mark.unlink(missing_ok=True)
    return reply


def serve_pending(paths: StatePaths, handler: Callable[[str, dict[str, Any]], Any]) -> int:
    """Answer every waiting request in arrival order; returns how many.

    A request is carried out once at most: it is renamed to ``<id>.taken`` before it is acted
    on, and a reply that cannot be written (a full disk) is kept and written on a later call,
    unchanged, instead of the request being carried out again.
    """
    if not paths.requests.exists():
        return 0
    _deliver_kept(paths, handler)
    pending = sorted(
        p for p in paths.requests.glob("*.json")
        if not p.name.endswith(".reply.json") and not p.name.startswith(".")
    )
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
            write_atomic(paths.requests / f"{rid}.reply.json", reply)
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
    (paths.requests / f"{rid}.reply.json").unlink(missing_ok=True)
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


__all__ = ["abandon", "serve_pending", "submit", "taken", "wait_reply", "withdraw"]
