"""Binding the UI: a private Unix socket by default, or a loopback port; and the ssh line
that reaches it from a laptop."""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Callable
from pathlib import Path

import uvicorn

from hpcdet.paths import StatePaths, hostname
from hpcdet.private import private_dir
from hpcdet.ui.app import make_app
from hpcdet.ui.door import token

SOCKET = "ui.sock"


def how_to_reach(paths: StatePaths, secret: str, port: int | None, sock: Path | None) -> str:
    """What to paste on a laptop, and the URL to open there."""
    where = f"{getpass.getuser()}@{hostname()}"
    target = str(sock) if sock is not None else f"127.0.0.1:{port}"
    return (f"On your laptop:  ssh -N -L 8765:{target} {where}\n"
            f"then open:       http://localhost:8765/?token={secret}")


def serve(paths: StatePaths, host: str | None, port: int | None,
          say: Callable[[str], None]) -> None:
    """Serve until interrupted: on ``host:port`` when a port is given, else on the state
    directory's private socket."""
    secret = token(private_dir(paths.root, share_with_group=None))
    app = make_app(paths, secret)
    if port is None:
        sock = paths.root / SOCKET
        sock.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is its user's alone from the start
        try:
            listener.bind(str(sock))
        finally:
            os.umask(old)
        say(how_to_reach(paths, secret, None, sock))
        config = uvicorn.Config(app, fd=listener.fileno(), log_level="warning")
    else:
        listener = socket.socket(socket.AF_INET6 if ":" in (host or "") else socket.AF_INET)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host or "127.0.0.1", port))
        bound = listener.getsockname()[1]
        say(how_to_reach(paths, secret, bound, None))
        config = uvicorn.Config(app, fd=listener.fileno(), log_level="warning")
    try:
        uvicorn.Server(config).run()
    finally:
        listener.close()
