"""The UI's application: pages and JSON over the views the CLI uses, actions through the
daemon link, every route behind the door (``door.guard``). Read-only unless the request holds
the token and comes from one of the server's own pages."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from hpcdet.errors import HpcdetError, NotFoundError, UsageError
from hpcdet.paths import StatePaths
from hpcdet.ui.api import api_routes
from hpcdet.ui.door import Door, guard
from hpcdet.ui.proxy import Locate, proxy_routes, upstream_client
from hpcdet.views.access import read_store

if TYPE_CHECKING:
    from hpcdet.views.access import Queries

# The pages, the scripts and the vendored plotting library: all in the wheel, no CDN.
STATIC = Path(__file__).parent / "static"
PAGES = {"/": "experiments.html", "/experiments/{exp_id:int}": "experiment.html",
         "/trials/{trial_id:int}": "trial.html", "/queue": "queue.html",
         "/cluster": "cluster.html", "/tasks": "tasks.html"}
# hpcdet's errors as HTTP answers; their messages say what to do.
STATUS = {NotFoundError: 404, UsageError: 400, HpcdetError: 409}


def no_tasks(task_id: int) -> tuple[str, int, str] | None:
    raise NotFoundError(f"no interactive task {task_id}")


def make_app(paths: StatePaths, door: Door, *, locate: Locate | None = None) -> Starlette:
    """The application for the state directory ``paths``, behind ``door``; ``/proxy/<id>/``
    reaches the interactive task that ``locate`` finds (none when not given)."""
    stores: list[Queries] = []
    opening = threading.Lock()

    def store() -> Queries:
        with opening:  # handlers run on a thread pool
            if not stores:
                stores.append(read_store(paths))
        return stores[0]

    def page(name: str) -> Callable[[Request], Awaitable[Response]]:
        async def serve(request: Request) -> Response:
            return FileResponse(STATIC / name, headers={"cache-control": "no-store"})
        return serve

    def error(status: int) -> Callable[[Request, Exception], Response]:
        return lambda request, e: JSONResponse({"error": str(e)}, status_code=status)

    nodes = upstream_client()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await nodes.aclose()

    routes = [
        *(Route(url, page(name)) for url, name in PAGES.items()),
        *api_routes(paths, store),
        *proxy_routes(locate or no_tasks, door, nodes),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan,
                     middleware=[Middleware(BaseHTTPMiddleware, dispatch=guard(door))],
                     exception_handlers={kind: error(code) for kind, code in STATUS.items()})
