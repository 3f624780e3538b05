"""The typed daemon client: each operation goes to the daemon as its request, and the answer
comes back typed, through the request files the daemon serves."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpcdet import __version__
from hpcdet.daemon import requests as req
from hpcdet.errors import HpcdetError
from hpcdet.link import connect
from hpcdet.paths import StatePaths
from hpcdet.protocol import process
from hpcdet.protocol.messages import (
    Continue,
    ContinueTrial,
    Created,
    JobUpdate,
    Kill,
    Pause,
    UpdateJobs,
)


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[tuple[StatePaths, list[Any]]]:
    """A state directory whose requests a thread serves as the daemon would, recording them."""
    paths = StatePaths(tmp_path / "state")
    paths.requests.mkdir(parents=True)
    seen: list[Any] = []
    alive = process.DaemonInfo({"host": "here", "pid": 1, "version": __version__}, {}, True,
                               True)
    monkeypatch.setattr(process, "info", lambda p: alive)
    stop = threading.Event()

    def handler(op: str, args: dict[str, Any]) -> Any:
        seen.append((op, args))
        if op == "pause" and args["exp_id"] == 404:
            raise HpcdetError("experiment 404 not found")
        if op in ("create", "continue_trial"):
            return {"experiment_id": 5, "trial_ids": [8, 9], "warning": "w"}
        return f"{op} done"

    def serve() -> None:
        while not stop.is_set():
            req.serve_pending(paths, handler)
            stop.wait(0.02)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield paths, seen
    stop.set()
    thread.join()


def test_each_operation_is_its_request(served: tuple[StatePaths, list[Any]]) -> None:
    paths, seen = served
    client = connect(paths)
    assert client.send(Pause(1)) == "pause done"
    assert client.send(Kill(2)) == "kill done"
    assert client.send(Continue(3)) == "continue done"
    assert client.send(ContinueTrial(4)) == Created(5, [8, 9], "w")
    assert client.send(UpdateJobs.of([JobUpdate(1, "priority", 7)])) == "update_jobs done"
    assert seen == [
        ("pause", {"exp_id": 1}), ("kill", {"exp_id": 2}),
        ("continue", {"exp_id": 3}),  # a field at its default is not sent
        ("continue_trial", {"trial_id": 4}),
        ("update_jobs", {"updates": [{"job": 1, "field": "priority", "value": 7}]}),
    ]
    assert sorted(p.name for p in paths.requests.iterdir()) == []


def test_the_daemons_error_is_raised_as_it_said_it(served: tuple[StatePaths, list[Any]]) -> None:
    paths, _ = served
    with pytest.raises(HpcdetError, match="experiment 404 not found"):
        connect(paths).send(Pause(404))


def test_an_error_from_a_daemon_of_another_version_says_how_to_restart_it(
        served: tuple[StatePaths, list[Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    """After `pip install -U hpcdet` the daemon started before runs on: an error it answers
    may come from its being older, and the message says how to run this version's."""
    paths, _ = served
    for record, said in (({"version": "0.0.9"}, "started by hpcdet 0.0.9"),
                         ({}, "started by an earlier hpcdet")):
        other = process.DaemonInfo({"host": "here", "pid": 1, **record}, {}, True, True)
        monkeypatch.setattr(process, "info", lambda p, info=other: info)
        assert connect(paths).send(Pause(1)) == "pause done"  # an answer is left as it is
        with pytest.raises(HpcdetError) as raised:
            connect(paths).send(Pause(404))
        message = str(raised.value)
        assert message.startswith("experiment 404 not found\n(the daemon (pid 1) was " + said)
        assert f"this is hpcdet {__version__}: `hpcdet daemon stop`" in message


def test_create_sends_the_snapshot_and_announces_it(
        served: tuple[StatePaths, list[Any]], tmp_path: Path) -> None:
    paths, seen = served
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "train.py").write_text("print(1)\n")
    announced = []
    created = connect(paths).create({"name": "x"}, context,
                                    on_snapshot=lambda files, size: announced.append((files, size)))
    assert created == Created(5, [8, 9], "w")
    assert announced == [(1, 9)]
    [(op, args)] = seen
    assert op == "create" and args["config"] == {"name": "x"}
    staging = Path(args["staging"])
    assert staging.parent == paths.requests and staging.suffix == ".context"
    assert staging.name.startswith(f"{args['request_id']}-")
    # A request id of the caller's names its request; its snapshot still has a name of its own.
    again = connect(paths).create({"name": "x"}, context, request_id="laptop-1")
    assert again == created and seen[-1][1]["request_id"] == "laptop-1"
    assert seen[-1][1]["staging"] != args["staging"]


def test_a_create_the_daemon_never_takes_is_withdrawn_with_its_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = StatePaths(tmp_path / "state")
    paths.requests.mkdir(parents=True)
    monkeypatch.setattr(process, "info",
                        lambda p: process.DaemonInfo({"host": "h", "pid": 1}, {}, True, True))
    monkeypatch.setenv("HPCDET_REQUEST_TIMEOUT", "0.2")
    context = tmp_path / "ctx"
    context.mkdir()
    with pytest.raises(HpcdetError, match="it was withdrawn and no experiment was created"):
        connect(paths).create({"name": "x"}, context)
    assert list(paths.requests.iterdir()) == []
