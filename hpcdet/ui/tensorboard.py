"""TensorBoard behind the UI's door. TensorBoard has no authentication and serves TCP only,
so it never listens itself: its WSGI application runs in this process, reached only through
the token-guarded socket or loopback port of `serve`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from a2wsgi import WSGIMiddleware
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.routing import Mount
from starlette.types import ASGIApp

from hpcdet.errors import UsageError
from hpcdet.ui.door import Door, guard

# TensorBoard sets its own Content-Security-Policy; the door adds only what it lacks.
HEADERS = {"x-frame-options": "DENY", "referrer-policy": "same-origin"}


def tensorboard_wsgi(logdirs: dict[str, Path]) -> Any:
    """TensorBoard's WSGI application over ``logdirs`` (run name -> directory).

    Raises:
        UsageError: TensorBoard is not installed, or a path cannot be named to it.
    """
    try:
        from tensorboard import program
    except ImportError:
        raise UsageError("hpcdet tensorboard needs TensorBoard where hpcdet runs: "
                         "pip install 'hpcdet[tensorboard]'") from None
    for name, path in logdirs.items():
        if "," in str(path) or ":" in str(path):
            raise UsageError(f"TensorBoard cannot read {path} ({name}): its --logdir_spec "
                             "takes no ',' or ':' in a path; move the checkpoint storage")
    taken: list[Any] = []

    class Handover(program.TensorBoardServer):  # type: ignore[misc]
        """TensorBoard's server hook, used only to take its application."""

        def __init__(self, wsgi_app: Any, flags: Any) -> None:
            taken.append(wsgi_app)

        def serve_forever(self) -> None:
            pass

        def get_url(self) -> str:
            return ""

    board = program.TensorBoard(server_class=Handover)
    # load_fast=false: the fast loader is a separate gRPC server on a loopback port, which
    # any user of the login node could read from.
    board.configure(logdir_spec=",".join(f"{n}:{p}" for n, p in logdirs.items()),
                    load_fast="false", reload_interval=15.0)
    board.launch()
    return taken[0]


def make_tensorboard_app(logdirs: dict[str, Path], door: Door) -> Starlette:
    board = cast(ASGIApp, WSGIMiddleware(tensorboard_wsgi(logdirs)))
    return Starlette(routes=[Mount("/", app=board)],
                     middleware=[Middleware(BaseHTTPMiddleware,
                                            dispatch=guard(door, HEADERS))])
