"""Binding the UI (and TensorBoard): a private Unix socket by default, or a loopback port;
the ssh line that reaches it from a laptop; and serving until Ctrl-C or, if asked, until no
page has asked for anything for a while."""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from hpcdet.errors import UsageError
from hpcdet.paths import StatePaths, hostname
from hpcdet.private import private_dir
from hpcdet.ui.door import Door, bound_hosts, cookie_name, new_token, token

# sockaddr_un's sun_path holds 108 bytes on Linux, the last a NUL.
SOCKET_PATH_MAX = 107


def how_to_reach(secret: str, local_port: int, port: int | None, sock: Path | None) -> str:
    """What to paste on a laptop, and the URL to open there."""
    where = f"{getpass.getuser()}@{hostname()}"
    target = str(sock) if sock is not None else f"127.0.0.1:{port}"
    return (f"On your laptop:  ssh -N -L {local_port}:{target} {where}\n"
            f"then open:       http://localhost:{local_port}/?token={secret}")


def listen(sock: Path, host: str | None, port: int | None) -> tuple[socket.socket, int | None]:
    """A listening socket: on ``host:port`` when a port is given (and the port it got), else
    the Unix socket ``sock``, its user's alone from the start. It listens at once, so a
    client told where it is waits in the backlog until the server accepts, rather than being
    refused."""
    if port is None:
        if len(os.fsencode(sock)) > SOCKET_PATH_MAX:
            raise UsageError(f"the UI's private socket {sock} is {len(os.fsencode(sock))} "
                             f"bytes long, past the {SOCKET_PATH_MAX} a Unix socket's path "
                             "may have: serve on a loopback port instead (--port 0), or use "
                             "a shorter state directory (HPCDET_HOME)")
        sock.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(str(sock))
        finally:
            os.umask(old)
        listener.listen(128)
        return listener, None
    listener = socket.socket(socket.AF_INET6 if ":" in (host or "") else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host or "127.0.0.1", port))
    listener.listen(128)
    return listener, int(listener.getsockname()[1])


class Idle:
    """ASGI middleware that remembers when a request last came."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.last = time.monotonic()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.last = time.monotonic()
        await self.app(scope, receive, send)


def run(app: ASGIApp, listener: socket.socket, idle_timeout: float | None = None,
        on_idle: Callable[[], None] | None = None) -> None:
    """Serve ``app`` on ``listener`` until interrupted, or until ``idle_timeout`` seconds pass
    without a request (TensorBoard's open pages ask every 30 s)."""
    watched = Idle(app)
    server = uvicorn.Server(uvicorn.Config(watched, fd=listener.fileno(), log_level="warning"))
    if idle_timeout is not None:
        def watch() -> None:
            while not server.should_exit:
                time.sleep(min(5.0, idle_timeout / 4))
                if time.monotonic() - watched.last > idle_timeout:
                    if on_idle is not None:
                        on_idle()
                    server.should_exit = True
        threading.Thread(target=watch, daemon=True).start()
    try:
        server.run()
    finally:
        listener.close()


def serve(paths: StatePaths, make: Callable[[Door], ASGIApp], sock_name: str, local_port: int,
          host: str | None, port: int | None, say: Callable[[str], None],
          idle_timeout: float | None = None, rotate: bool = False) -> None:
    """Serve the application ``make(door)`` behind the user's token (a fresh one if
    ``rotate``), on ``host:port`` when a port is given, else on the state directory's private
    socket ``sock_name``; ``say`` how to reach it (through ``local_port`` on the laptop)."""
    state = private_dir(paths.root, share_with_group=None)
    secret = new_token(state) if rotate else token(state)
    sock = paths.root / sock_name
    listener, bound = listen(sock, host, port)
    app = make(Door(lambda: token(state), cookie_name(bound, sock_name),
                    bound_hosts(host if port is not None else None)))
    say(how_to_reach(secret, local_port, bound, None if port is not None else sock))
    run(app, listener, idle_timeout,
        (lambda: say(f"no request for {idle_timeout:.0f} s: stopping")) if idle_timeout else None)
