"""The UI's application: every route behind the door, JSON over the views the CLI uses, and
actions through the daemon link. Read-only unless the request holds the token and comes from
one of the server's own pages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from hpcdet.errors import HpcdetError, NotFoundError, UsageError
from hpcdet.paths import StatePaths
from hpcdet.store.repository import Store
from hpcdet.ui.api import api_routes
from hpcdet.ui.door import COOKIE, admits, presented, same_origin
from hpcdet.views.access import read_store

# The pages, the scripts and the vendored plotting library: all in the wheel, no CDN.
STATIC = Path(__file__).parent / "static"
PAGES = {"/": "experiments.html", "/experiments/{exp_id:int}": "experiment.html",
         "/trials/{trial_id:int}": "trial.html", "/queue": "queue.html",
         "/cluster": "cluster.html"}


def make_app(paths: StatePaths, secret: str) -> Starlette:
    """The application for the state directory ``paths``, opened by ``secret``."""
    stores: list[Store] = []

    def store() -> Store:
        if not stores:
            stores.append(read_store(paths))
        return stores[0]

    def page(name: str) -> Callable[[Request], Awaitable[Response]]:
        async def serve(request: Request) -> Response:
            return FileResponse(STATIC / name, headers={"cache-control": "no-store"})
        return serve

    routes = [
        *(Route(url, page(name)) for url, name in PAGES.items()),
        *api_routes(paths, store),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]

    async def door(request: Request, call_next: Callable[[Request], Awaitable[Response]]
                   ) -> Response:
        given = presented(request.cookies.get(COOKIE), request.headers.get("authorization"),
                          request.query_params.get("token"))
        if not admits(secret, given):
            return JSONResponse({"error": "this UI needs its token: open the URL `hpcdet ui` "
                                 "printed"}, status_code=401)
        if request.method != "GET" and not same_origin(
                request.headers.get("origin"), request.headers.get("referer"),
                request.headers.get("host")):
            return JSONResponse({"error": "actions come only from this server's own pages"},
                                status_code=403)
        if "token" in request.query_params:
            # The first visit: keep the token in a cookie and out of the address bar/history.
            rest = {k: v for k, v in request.query_params.items() if k != "token"}
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            moved = RedirectResponse(target, status_code=303)
            moved.set_cookie(COOKIE, secret, httponly=True, samesite="strict")
            return moved
        try:
            return await call_next(request)
        except NotFoundError as e:
            return JSONResponse({"error": str(e)}, status_code=404)
        except UsageError as e:
            return JSONResponse({"error": str(e)}, status_code=400)
        except HpcdetError as e:
            return JSONResponse({"error": str(e)}, status_code=409)

    async def headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]
                      ) -> Response:
        response = await door(request, call_next)
        # Nothing from elsewhere: no framing by another site, no scripts or data from it.
        response.headers["content-security-policy"] = (
            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "frame-ancestors 'none'")
        response.headers["x-content-type-options"] = "nosniff"
        response.headers["referrer-policy"] = "same-origin"
        return response

    return Starlette(routes=routes,
                     middleware=[Middleware(BaseHTTPMiddleware, dispatch=headers)])
