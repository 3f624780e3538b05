"""The door's reverse proxy to interactive tasks (JupyterLab on a compute node): HTTP and
WebSocket under ``/proxy/<task_id>/``, passed on with the path unchanged (the task serves
under that base URL) to the address ``locate`` gives. Nothing of the door's crosses: not its
cookie, not its token; the node sees the door's own pages as its own origin. The door adds
the task's own token (JupyterLab's, which guards it from everyone else on the cluster's
network), so whoever is through the door is in, and the token never reaches the browser."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

import anyio
import httpx
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import Scope
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.typing import Subprotocol

from hpcdet.errors import HpcdetError, NotFoundError
from hpcdet.ui.door import Door, socket_refusal

# task id -> (host, port, token) where it listens and what lets the door in; None while it
# does not listen yet. Raises NotFoundError for an id that is no interactive task.
Locate = Callable[[int], "tuple[str, int, str] | None"]

PATH = "/proxy/{task_id:int}/{path:path}"
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
# RFC 9110 7.6.1: meant for one connection, never passed on (with those Connection names).
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                        "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"})
# Every hpcdet server's cookie starts so; a browser sends all of a host's cookies to each of
# its ports, so the other servers' sessions would reach the node too.
HPCDET_COOKIES = "hpcdet_"
# Long enough for a kernel's start; a node that does not answer a connection in 10 s is down.
TIMEOUT = httpx.Timeout(300.0, connect=10.0)
# A close frame's reason holds 123 bytes.
REASON_MAX = 123
NOT_SENDABLE = {1005: 1000, 1006: 1001}


@dataclass(frozen=True)
class Refusal:
    """Why the proxy answers itself: an HTTP status and a message saying what to do."""

    status: int
    message: str

    def response(self) -> Response:
        headers = {"retry-after": "5"} if self.status == 503 else None
        return JSONResponse({"error": self.message}, status_code=self.status, headers=headers)

    @property
    def close_code(self) -> int:
        """The WebSocket close code: 1014 (bad gateway) for 502, else 4000 + the status."""
        return 1014 if self.status == 502 else 4000 + self.status


def upstream_client() -> httpx.AsyncClient:
    """The client of the nodes: no redirect followed, and no proxy from the environment (a
    login node's http_proxy leads out of the cluster, never to its nodes)."""
    return httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=TIMEOUT)


def proxy_routes(locate: Locate, door: Door,
                 client: httpx.AsyncClient | None = None) -> list[BaseRoute]:
    """The HTTP and WebSocket routes of ``/proxy/<task_id>/<path>``. HTTP routes rely on the
    app's ``door.guard``; the WebSocket route checks ``door`` itself (the guard never sees
    WebSockets) and closes with 1008 before it reaches the node. ``client`` (an
    ``upstream_client()`` the caller closes) keeps connections to the nodes open between
    requests; the routes make their own when not given."""
    client = client or upstream_client()

    async def http(request: Request) -> Response:
        task_id: int = request.path_params["task_id"]
        found = await find(locate, task_id)
        if isinstance(found, Refusal):
            return found.response()
        upstream = netloc(*found[:2])
        url = httpx.URL(f"http://{upstream}").copy_with(raw_path=target(request.scope))
        headers = forwarded(request.headers.raw, door.cookie, request.headers.get("host"),
                            upstream) + [("authorization", f"token {found[2]}")]
        sent = client.build_request(request.method, url, headers=headers,
                                    content=await request.body())
        try:
            answer = await client.send(sent, stream=True)
        except httpx.TransportError as e:
            return unreachable(task_id, upstream, e).response()
        response = StreamingResponse(answer.aiter_raw(), status_code=answer.status_code,
                                     background=BackgroundTask(answer.aclose))
        response.raw_headers = returned(answer.headers.raw, upstream)
        return response

    async def socket(websocket: WebSocket) -> None:
        refused = socket_refusal(door, websocket.headers, websocket.cookies)
        if refused is not None:
            await refuse(websocket, 1008, refused)
            return
        task_id: int = websocket.path_params["task_id"]
        found = await find(locate, task_id)
        if isinstance(found, Refusal):
            await refuse(websocket, found.close_code, found.message)
            return
        upstream = netloc(*found[:2])
        offered = [Subprotocol(p) for p in websocket.scope.get("subprotocols", [])]
        cookie = without_hpcdet_cookies(websocket.headers.get("cookie", ""), door.cookie)
        try:
            far = await connect(
                f"ws://{upstream}{target(websocket.scope).decode('latin-1')}",
                # Jupyter refuses an Origin other than its own address but lets in none;
                # socket_refusal has checked the browser's.
                subprotocols=offered or None, origin=None,
                additional_headers={"authorization": f"token {found[2]}",
                                    **({"cookie": cookie} if cookie else {})},
                proxy=None,  # as upstream_client's trust_env=False
                # Kernel messages carry whole outputs (images, tables): no 1 MiB cap.
                max_size=None)
        except (OSError, asyncio.TimeoutError, WebSocketException) as e:
            await refuse(websocket, 1014, unreachable(task_id, upstream, e).message)
            return
        async with far:
            await websocket.accept(subprotocol=far.subprotocol)
            await relay(websocket, far)

    return [Route(PATH, http, methods=METHODS), WebSocketRoute(PATH, socket)]


async def find(locate: Locate, task_id: int) -> tuple[str, int, str] | Refusal:
    """Where the task listens, or why the proxy cannot reach it (``locate`` may block)."""
    try:
        found = await run_in_threadpool(locate, task_id)
    except NotFoundError as e:
        return Refusal(404, str(e))
    except HpcdetError as e:  # it has ended, or its database cannot be read
        return Refusal(409, str(e))
    if found is None:
        return Refusal(503, f"notebook {task_id} is not running yet: its job waits in the "
                            "queue or JupyterLab is starting; `hpcdet notebook list` shows it")
    return found


def unreachable(task_id: int, upstream: str, error: Exception) -> Refusal:
    cause = str(error) or type(error).__name__
    return Refusal(502, f"notebook {task_id} at {upstream} does not answer ({cause}): its job "
                        "may have ended; `hpcdet notebook list` shows it")


def netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def target(scope: Scope) -> bytes:
    """The request's path and query as the client sent them: a name's %2F stays escaped."""
    path: bytes = scope.get("raw_path") or quote(scope["path"]).encode()
    query: bytes = scope.get("query_string", b"")
    return path + b"?" + query if query else path


def hop_by_hop(raw: Iterable[tuple[bytes, bytes]]) -> frozenset[str]:
    """The headers not to pass on: RFC 9110's, and those the Connection header names."""
    named = {token.strip().lower() for name, value in raw if name.lower() == b"connection"
             for token in value.decode("latin-1").split(",")}
    return HOP_BY_HOP | named


def without_hpcdet_cookies(header: str, door_cookie: str) -> str:
    kept = [pair.strip() for pair in header.split(";") if pair.strip()]
    return "; ".join(p for p in kept if not (p.startswith(HPCDET_COOKIES)
                                             or p.split("=", 1)[0].strip() == door_cookie))


def rebase(url: str, host: str | None, upstream: str) -> str:
    """``url`` on the node when it names this server (an Origin or a Referer from the door's
    pages): JupyterLab accepts an action only from its own origin, which the door is."""
    parts = urlsplit(url)
    if host is None or parts.netloc != host:
        return url
    return urlunsplit(("http", upstream, parts.path, parts.query, parts.fragment))


def forwarded(raw: Iterable[tuple[bytes, bytes]], door_cookie: str, host: str | None,
              upstream: str) -> list[tuple[str, str]]:
    """The request's headers as the node gets them: no hop-by-hop ones, no Host or length
    (httpx sets both), no cookie of hpcdet's and no Authorization (the door's is its own; it
    adds the task's)."""
    pairs = [(n.decode("latin-1").lower(), v.decode("latin-1")) for n, v in raw]
    drop = hop_by_hop(raw) | {"host", "content-length"}
    headers: list[tuple[str, str]] = []
    for name, value in pairs:
        if name in drop or name == "authorization":
            continue
        if name == "cookie":
            value = without_hpcdet_cookies(value, door_cookie)
            if not value:
                continue
        if name in ("origin", "referer"):
            value = rebase(value, host, upstream)
        headers.append((name, value))
    return headers


def returned(raw: Iterable[tuple[bytes, bytes]], upstream: str) -> list[tuple[bytes, bytes]]:
    """The node's headers as the browser gets them: no hop-by-hop ones, and a Location on
    the node made relative, so a redirect stays behind the door."""
    raw = list(raw)
    drop = hop_by_hop(raw)
    origin = f"http://{upstream}".encode("latin-1")
    headers: list[tuple[bytes, bytes]] = []
    for name, value in raw:
        name = name.lower()
        if name.decode("latin-1") in drop:
            continue
        if name == b"location" and value.startswith(origin + b"/"):
            value = value[len(origin):]
        headers.append((name, value))
    return headers


async def refuse(websocket: WebSocket, code: int, reason: str) -> None:
    """Accept, to be able to say why, and close. A browser that offered subprotocols fails a
    handshake that picks none, and would see 1006 instead of ``code``."""
    offered = websocket.scope.get("subprotocols", [])
    await websocket.accept(subprotocol=offered[0] if offered else None)
    await close(websocket, code, reason)


async def close(websocket: WebSocket, code: int | None, reason: str | None) -> None:
    with suppress(WebSocketDisconnect, RuntimeError):  # it may have gone already
        await websocket.close(sendable(code), short(reason or ""))


def sendable(code: int | None) -> int:
    """``code`` as a close frame may carry it: 1005 (none given) and 1006 (the connection
    broke) are only ever reported, never sent."""
    if code is None:
        return 1000
    return NOT_SENDABLE.get(code, code)


def short(reason: str) -> str:
    return reason.encode()[:REASON_MAX].decode(errors="ignore")


async def relay(near: WebSocket, far: ClientConnection) -> None:
    """Frames both ways, text and binary, until one side closes; the other side is then
    closed with its code."""
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(down, near, far, tasks.cancel_scope)
        await up(near, far)
        tasks.cancel_scope.cancel()


async def up(near: WebSocket, far: ClientConnection) -> None:
    """The browser's frames to the node, until either closes."""
    while True:
        message = await near.receive()
        try:
            if message["type"] == "websocket.disconnect":
                await far.close(sendable(message.get("code")), short(message.get("reason") or ""))
                return
            if message.get("text") is not None:
                await far.send(message["text"])
            elif message.get("bytes") is not None:
                await far.send(message["bytes"])
        except ConnectionClosed:
            await close(near, far.close_code, far.close_reason)
            return


async def down(near: WebSocket, far: ClientConnection, scope: anyio.CancelScope) -> None:
    """The node's frames to the browser; when the node closes, the browser is closed too."""
    try:
        async for message in far:
            if isinstance(message, str):
                await near.send_text(message)
            else:
                await near.send_bytes(message)
    except ConnectionClosed:
        pass
    except WebSocketDisconnect:
        return  # the browser left: ``up`` closes the node's side
    await close(near, far.close_code, far.close_reason)
    scope.cancel()
