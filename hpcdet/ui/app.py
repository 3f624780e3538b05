"""The UI's application: every route behind the door, JSON over the views the CLI uses, and
actions through the daemon link. Read-only unless the request holds the token and comes from
one of the server's own pages."""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from hpcdet.errors import HpcdetError, NotFoundError
from hpcdet.link import connect
from hpcdet.paths import StatePaths
from hpcdet.store.repository import Store
from hpcdet.ui.door import COOKIE, admits, presented, same_origin
from hpcdet.views.access import read_store
from hpcdet.views.experiments import describe_experiment, experiment_rows
from hpcdet.views.trials import describe_trial, trial_dict, trial_metrics

# What a POST may ask of an experiment, as the daemon link names it.
ACTIONS = ("pause", "activate", "cancel", "kill")


def make_app(paths: StatePaths, secret: str) -> Starlette:
    """The application for the state directory ``paths``, opened by ``secret``."""
    stores: list[Store] = []

    def store() -> Store:
        if not stores:
            stores.append(read_store(paths))
        return stores[0]

    async def index(request: Request) -> Response:
        rows = "".join(
            f"<tr><td>{r.experiment.id}</td><td>{html.escape(r.experiment.name)}</td>"
            f"<td>{r.experiment.state}</td><td>{r.progress:.1%}</td></tr>"
            for r in experiment_rows(store()))
        return HTMLResponse(
            "<!doctype html><meta charset=utf-8><title>hpcdet</title><h1>Experiments</h1>"
            f"<table id=experiments><tr><th>ID<th>Name<th>State<th>Progress</tr>{rows}</table>")

    async def experiments(request: Request) -> Response:
        return JSONResponse([r.to_dict() for r in experiment_rows(store())])

    async def experiment(request: Request) -> Response:
        view = describe_experiment(store(), int(request.path_params["exp_id"]))
        return JSONResponse({
            "experiment": view.experiment.model_dump(exclude={"config_json"}),
            "config": view.config,
            "trials": [trial_dict(t.trial) for t in view.trials],
        })

    async def trial(request: Request) -> Response:
        return JSONResponse(describe_trial(store(), int(request.path_params["trial_id"]))
                            .to_dict())

    async def metrics(request: Request) -> Response:
        reported = trial_metrics(store(), int(request.path_params["trial_id"]),
                                 request.query_params.get("group") or None)
        return JSONResponse([{"group": m.group, "steps_completed": m.steps_completed,
                              "metrics": m.metrics} for m in reported.rows])

    async def act(request: Request) -> Response:
        action = request.path_params["action"]
        if action not in ACTIONS:
            return JSONResponse({"error": f"no action {action!r}; one of {list(ACTIONS)}"},
                                status_code=404)
        said = getattr(connect(paths), action)(int(request.path_params["exp_id"]))
        return JSONResponse({"said": said})

    routes = [
        Route("/", index),
        Route("/api/experiments", experiments),
        Route("/api/experiments/{exp_id:int}", experiment),
        Route("/api/experiments/{exp_id:int}/{action:str}", act, methods=["POST"]),
        Route("/api/trials/{trial_id:int}", trial),
        Route("/api/trials/{trial_id:int}/metrics", metrics),
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
        except HpcdetError as e:
            return JSONResponse({"error": str(e)}, status_code=409)

    return Starlette(routes=routes, middleware=[Middleware(BaseHTTPMiddleware, dispatch=door)])
