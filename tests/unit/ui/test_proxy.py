"""The UI's proxy to interactive tasks, between real servers: uvicorn serving the UI behind
its door, and uvicorn serving a stand-in for JupyterLab on a loopback port that echoes what
reached it (HTTP and WebSocket) under ``/proxy/<id>/``."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp
from starlette.websockets import WebSocket
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin, Subprotocol

from hpcdet.errors import NotFoundError
from hpcdet.paths import StatePaths
from hpcdet.ui.app import make_app
from hpcdet.ui.door import Door, socket_refusal
from hpcdet.ui.proxy import forwarded, returned, sendable, without_hpcdet_cookies
from hpcdet.ui.serve import listen

TOKEN = "the-door-token"
COOKIE = "hpcdet_test"
NODE_TOKEN = "jupyterlabs-own-token"
JUPYTER = "v1.kernel.websocket.jupyter.org"
TASK, QUEUED, GONE = 7, 8, 9


@dataclass
class Seen:
    """What reached the stand-in notebook."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    sockets: list[dict[str, Any]] = field(default_factory=list)
    closes: list[int | None] = field(default_factory=list)


def notebook(seen: Seen) -> Starlette:
    async def echo(request: Request) -> Response:
        seen.requests.append({"method": request.method,
                              "raw_path": request.scope["raw_path"].decode(),
                              "query": request.scope["query_string"].decode(),
                              "headers": dict(request.headers),
                              "body": (await request.body()).decode()})
        if request.url.path.endswith("/redirect"):
            return RedirectResponse(f"http://{request.headers['host']}/proxy/{TASK}/lab", 302)
        response = JSONResponse(seen.requests[-1], status_code=201 if request.method == "POST"
                                else 200, headers={"x-upstream": "yes"})
        response.set_cookie("_xsrf", "one", path=f"/proxy/{TASK}/")
        response.set_cookie("username-node", "two", path=f"/proxy/{TASK}/")
        return response

    async def echo_socket(websocket: WebSocket) -> None:
        offered = websocket.scope.get("subprotocols", [])
        seen.sockets.append({"raw_path": websocket.scope["raw_path"].decode(),
                             "query": websocket.scope["query_string"].decode(),
                             "headers": dict(websocket.headers), "offered": offered})
        await websocket.accept(subprotocol=offered[0] if offered else None)
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                seen.closes.append(message.get("code"))
                return
            if message.get("text") == "close-me":
                await websocket.close(4001, "bye")
                return
            if message.get("text") is not None:
                await websocket.send_text("echo " + message["text"])
            else:
                await websocket.send_bytes(b"echo " + message["bytes"])

    path = "/proxy/{rest:path}"
    return Starlette(routes=[Route(path, echo, methods=["GET", "POST", "PUT", "PATCH",
                                                         "DELETE", "HEAD", "OPTIONS"]),
                             WebSocketRoute(path, echo_socket)])


@contextmanager
def serving(app: ASGIApp, tmp: Path) -> Iterator[int]:
    """``app`` on a free loopback port, by uvicorn in a thread."""
    listener, port = listen(tmp / "unused.sock", "127.0.0.1", 0)
    assert port is not None
    server = uvicorn.Server(uvicorn.Config(app, fd=listener.fileno(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)
        listener.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class World:
    door: Door
    seen: Seen
    port: int
    upstream: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def session(self) -> str:
        return f"{COOKIE}={self.door.session}"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("proxy")
    seen = Seen()
    door = Door(lambda: TOKEN, COOKIE)
    dead = free_port()
    with serving(notebook(seen), tmp) as upstream:
        where: dict[int, tuple[str, int, str] | None] = {
            TASK: ("127.0.0.1", upstream, NODE_TOKEN), QUEUED: None,
            GONE: ("127.0.0.1", dead, NODE_TOKEN)}

        def locate(task_id: int) -> tuple[str, int, str] | None:
            if task_id not in where:
                raise NotFoundError(f"no interactive task {task_id}: `hpcdet notebook list`")
            return where[task_id]

        app = make_app(StatePaths(tmp / "state"), door, locate=locate)
        with serving(app, tmp) as port:
            yield World(door, seen, port, upstream)


def test_a_get_reaches_the_notebook_with_its_path_and_query_and_nothing_of_the_door(
        world: World) -> None:
    path = f"/proxy/{TASK}/api/contents/a%20b%2Fc.ipynb"
    answer = httpx.get(world.base + path + "?x=1&y=%2F", headers={
        "cookie": f"{world.session}; hpcdet_9999=other; _xsrf=abc",
        "authorization": f"Bearer {TOKEN}", "connection": "keep-alive, x-hop", "x-hop": "1"})
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert (got["method"], got["raw_path"], got["query"]) == ("GET", path, "x=1&y=%2F")
    assert got["headers"]["cookie"] == "_xsrf=abc"
    assert "x-hop" not in got["headers"]
    # The door lets its user in: the node gets its own token from the door, not the browser.
    assert got["headers"]["authorization"] == f"token {NODE_TOKEN}"
    assert got["headers"]["host"] == f"127.0.0.1:{world.upstream}"
    assert TOKEN not in json.dumps(got) and world.door.session not in json.dumps(got)
    assert answer.headers["x-upstream"] == "yes"
    assert len(answer.headers.get_list("set-cookie")) == 2
    # The notebook's own policy (JupyterLab evaluates code), not the door's; the rest stays.
    assert "content-security-policy" not in answer.headers
    assert answer.headers["x-content-type-options"] == "nosniff"


def test_a_post_carries_its_body_and_the_status_comes_back(world: World) -> None:
    origin = world.base
    answer = httpx.post(world.base + f"/proxy/{TASK}/api/sessions?k=v", content=b"payload",
                        headers={"cookie": world.session, "origin": origin,
                                 "referer": origin + f"/proxy/{TASK}/lab",
                                 "authorization": "token a-guess"})
    assert answer.status_code == 201, answer.text
    got = answer.json()
    assert (got["method"], got["body"], got["query"]) == ("POST", "payload", "k=v")
    # JupyterLab takes actions from its own origin only: the door's pages are that origin.
    node = f"http://127.0.0.1:{world.upstream}"
    assert got["headers"]["origin"] == node
    assert got["headers"]["referer"] == node + f"/proxy/{TASK}/lab"
    assert got["headers"]["authorization"] == f"token {NODE_TOKEN}"  # never the browser's


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE", "OPTIONS"])
def test_every_method_passes(world: World, method: str) -> None:
    answer = httpx.request(method, world.base + f"/proxy/{TASK}/x", content=b"b",
                           headers={"cookie": world.session, "origin": world.base})
    assert answer.status_code == 200 and answer.json()["method"] == method


def test_head_and_redirects_stay_behind_the_door(world: World) -> None:
    head = httpx.head(world.base + f"/proxy/{TASK}/x", headers={"cookie": world.session})
    assert head.status_code == 200 and head.content == b"" and head.headers["x-upstream"]
    moved = httpx.get(world.base + f"/proxy/{TASK}/redirect", headers={"cookie": world.session})
    assert moved.status_code == 302 and moved.headers["location"] == f"/proxy/{TASK}/lab"


def test_without_the_session_nothing_reaches_the_notebook(world: World) -> None:
    before = len(world.seen.requests)
    for headers in ({}, {"cookie": f"{COOKIE}=guess"}, {"authorization": "Bearer guess"}):
        answer = httpx.get(world.base + f"/proxy/{TASK}/lab", headers=headers)
        assert answer.status_code == 401 and "token" in answer.json()["error"]
    foreign = httpx.post(world.base + f"/proxy/{TASK}/api/x",
                         headers={"cookie": world.session, "origin": "https://evil.example"})
    assert foreign.status_code == 403
    assert len(world.seen.requests) == before


@pytest.mark.parametrize(("task", "status", "says"), [
    (1, 404, "no interactive task 1"), (QUEUED, 503, "hpcdet notebook list"),
    (GONE, 502, "127.0.0.1:")])
def test_a_task_not_there_says_what_to_do(world: World, task: int, status: int,
                                          says: str) -> None:
    answer = httpx.get(world.base + f"/proxy/{task}/lab", headers={"cookie": world.session})
    assert answer.status_code == status and says in answer.json()["error"]


def open_socket(world: World, path: str, cookie: str | None = None,
                origin: str | None = None, **more: Any) -> ClientConnection:
    headers = {"cookie": cookie} if cookie else None
    return connect(f"ws://127.0.0.1:{world.port}{path}", additional_headers=headers,
                   origin=Origin(origin or world.base), proxy=None, open_timeout=10, **more)


def closed_with(ws: ClientConnection) -> tuple[int | None, str | None]:
    with pytest.raises(ConnectionClosed):
        ws.recv(timeout=10)
    return ws.close_code, ws.close_reason


def eventually(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_websocket_relays_text_and_binary_both_ways(world: World) -> None:
    path = f"/proxy/{TASK}/api/kernels/k1/channels?session_id=s&token=jupyters"
    with open_socket(world, path, f"{world.session}; _xsrf=abc",
                     subprotocols=[Subprotocol(JUPYTER)]) as ws:
        assert ws.subprotocol == JUPYTER
        ws.send("hello")
        assert ws.recv(timeout=10) == "echo hello"
        ws.send(b"\x00\xff")
        assert ws.recv(timeout=10) == b"echo \x00\xff"
        ws.close(4002, "done")
    got = world.seen.sockets[-1]
    assert got["raw_path"] + "?" + got["query"] == path and got["offered"] == [JUPYTER]
    assert got["headers"]["cookie"] == "_xsrf=abc" and "origin" not in got["headers"]
    assert got["headers"]["authorization"] == f"token {NODE_TOKEN}"
    eventually(lambda: world.seen.closes[-1:] == [4002])


def test_the_notebook_closing_closes_the_browser_with_its_code(world: World) -> None:
    with open_socket(world, f"/proxy/{TASK}/terminals/1", world.session) as ws:
        ws.send("close-me")
        assert closed_with(ws) == (4001, "bye")


@pytest.mark.parametrize(("cookie", "origin"), [
    (None, None), (f"{COOKIE}=guess", None), ("session", "https://evil.example")])
def test_a_websocket_without_the_session_or_from_elsewhere_closes_1008(
        world: World, cookie: str | None, origin: str | None) -> None:
    before = len(world.seen.sockets)
    with open_socket(world, f"/proxy/{TASK}/api/events/subscribe",
                     world.session if cookie == "session" else cookie, origin,
                     subprotocols=[Subprotocol(JUPYTER)]) as ws:
        code, _ = closed_with(ws)
    assert code == 1008 and len(world.seen.sockets) == before


@pytest.mark.parametrize(("task", "code", "says"), [
    (1, 4404, "no interactive task 1"), (QUEUED, 4503, "is not running yet"),
    (GONE, 1014, "does not answer")])
def test_a_websocket_to_a_task_not_there_says_why(world: World, task: int, code: int,
                                                  says: str) -> None:
    with open_socket(world, f"/proxy/{task}/api/events/subscribe", world.session) as ws:
        got, reason = closed_with(ws)
    assert got == code and reason is not None and says in reason


def test_the_socket_door_applies_the_guards_rules() -> None:
    door = Door(lambda: TOKEN, COOKIE)
    own = {"host": "localhost:8765", "origin": "http://localhost:8765"}
    assert socket_refusal(door, own, {COOKIE: door.session}) is None
    assert socket_refusal(door, {**own, "authorization": f"Bearer {TOKEN}"}, {}) is None
    assert "token" in str(socket_refusal(door, own, {}))
    assert "token" in str(socket_refusal(door, {**own, "authorization": "Bearer x"},
                                         {COOKIE: door.session}))
    assert "pages" in str(socket_refusal(door, {**own, "origin": "http://evil.example"},
                                         {COOKIE: door.session}))
    assert "pages" in str(socket_refusal(door, {"host": own["host"]}, {COOKIE: door.session}))
    assert "names" in str(socket_refusal(door, {**own, "host": "evil.example"},
                                         {COOKIE: door.session}))


def test_headers_each_way() -> None:
    assert without_hpcdet_cookies("a=1; hpcdet_1=x;b=2; door=s", "door") == "a=1; b=2"
    raw = [(b"host", b"localhost:1"), (b"connection", b"x-hop"), (b"x-hop", b"1"),
           (b"te", b"trailers"), (b"content-length", b"3"), (b"authorization", b"Bearer t"),
           (b"origin", b"http://localhost:1"), (b"referer", b"http://elsewhere/p")]
    assert forwarded(raw, "door", "localhost:1", "node:8") == [
        ("origin", "http://node:8"), ("referer", "http://elsewhere/p")]
    back = [(b"Transfer-Encoding", b"chunked"), (b"Set-Cookie", b"a=1"),
            (b"Set-Cookie", b"b=2"), (b"Location", b"http://node:8/proxy/1/lab")]
    assert returned(back, "node:8") == [(b"set-cookie", b"a=1"), (b"set-cookie", b"b=2"),
                                        (b"location", b"/proxy/1/lab")]
    assert (sendable(None), sendable(1005), sendable(1006), sendable(4001)) == (
        1000, 1000, 1001, 4001)
