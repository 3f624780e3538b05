"""CLI -> daemon requests as files in the shared state directory.

Files work from every login node that sees the shared filesystem, need no open port, and
survive a daemon restart: an unanswered request is answered by the next daemon.
"""

from __future__ import annotations

import json
import logging
import os
import time
import traceback
import uuid
from typing import Any, Callable

from hpcdet.errors import DaemonError, HpcdetError
from hpcdet.exchange import read_json, write_atomic
from hpcdet.paths import StatePaths

log = logging.getLogger(__name__)


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
    raise DaemonError(
        f"the hpcdet daemon ({where}) did not answer within {timeout:.0f} s. "
        "See `hpcdet daemon status`; the request stays queued and will be answered when the "
        "daemon runs again."
    )


def serve_pending(paths: StatePaths, handler: Callable[[str, dict[str, Any]], Any]) -> int:
    """Answer every waiting request in arrival order; returns how many."""
    if not paths.requests.exists():
        return 0
    pending = sorted(
        p for p in paths.requests.glob("*.json")
        if not p.name.endswith(".reply.json") and not p.name.startswith(".")
    )
    for path in pending:
        rid = path.name[: -len(".json")]
        try:
            body = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # still being written by an old-style writer; next tick
        try:
            reply = {"ok": True, "result": handler(body["op"], body.get("args", {}))}
        except HpcdetError as e:
            reply = {"ok": False, "error": str(e)}
        except Exception as e:  # a bug: keep serving, report it, keep the traceback in the log
            log.error("request %s failed:\n%s", body.get("op"), traceback.format_exc())
            reply = {"ok": False, "error": f"internal error in the daemon: {e!r} (see daemon.log)"}
        write_atomic(paths.requests / f"{rid}.reply.json", reply)
        path.unlink(missing_ok=True)
    return len(pending)


__all__ = ["serve_pending", "submit", "wait_reply"]
