"""Requests are carried out once at most (issue 9, item 10)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from hpcdet.daemon import requests as req
from hpcdet.link import files as client_files
from hpcdet.paths import StatePaths
from hpcdet.protocol import calls
from hpcdet.rundir.atomic import read_json


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
    rid = calls.submit(paths, "create", {})
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
    rid = calls.submit(paths, "create", {})
    assert calls.withdraw(paths, rid)
    handler = Counting()
    req.serve_pending(paths, handler)
    assert handler.calls == []
    assert not calls.withdraw(paths, rid)


def test_the_answer_to_a_request_given_up_on_while_it_ran_is_logged_not_left(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    paths = StatePaths(tmp_path)
    rid = calls.submit(paths, "create", {})

    def gives_up(op: str, args: dict[str, Any]) -> Any:
        assert client_files.abandon(paths, rid) is None  # the CLI stops waiting while it runs
        return "done late"

    with caplog.at_level(logging.INFO, logger=req.__name__):
        req.serve_pending(paths, gives_up)
    assert "done late" in caplog.text
    assert list(paths.requests.iterdir()) == []


def test_a_request_given_up_on_after_its_answer_came_gets_the_answer(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    rid = calls.submit(paths, "create", {})
    req.serve_pending(paths, Counting())
    assert client_files.abandon(paths, rid) == {"ok": True, "result": "done"}
    assert list(paths.requests.iterdir()) == []
