"""Requests are carried out once at most (issue 9, item 10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcdet.daemon import requests as req
from hpcdet.exchange import read_json
from hpcdet.paths import StatePaths


class Counting:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, op: str, args: dict[str, Any]) -> Any:
        self.calls.append(op)
        return "done"


def test_a_request_taken_by_a_daemon_that_stopped_is_not_carried_out_again(
    tmp_path: Path,
) -> None:
    paths = StatePaths(tmp_path)
    rid = req.submit(paths, "create", {})
    handler = Counting()
    req.serve_pending(paths, handler)
    assert handler.calls == ["create"]
    # As left by a daemon killed after it took the request and before it answered:
    (paths.requests / f"{rid}.reply.json").unlink()
    (paths.requests / f"{rid}.taken").write_text("{}")
    req.serve_pending(paths, handler)
    assert handler.calls == ["create"]
    reply = read_json(paths.requests / f"{rid}.reply.json")
    assert not reply["ok"] and "stopped while carrying out this request" in reply["error"]
    assert not (paths.requests / f"{rid}.taken").exists()


def test_a_withdrawn_request_is_never_carried_out(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    rid = req.submit(paths, "create", {})
    assert req.withdraw(paths, rid)
    handler = Counting()
    req.serve_pending(paths, handler)
    assert handler.calls == []
    assert not req.withdraw(paths, rid)
