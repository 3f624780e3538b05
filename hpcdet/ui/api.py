"""The UI's JSON routes: the views the CLI reads, as the pages fetch them, and the actions
the daemon link carries out. Handlers are plain functions: Starlette runs them on its thread
pool, so a slow query never stalls another page."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from hpcdet.config.schema import INT64_MAX
from hpcdet.errors import UsageError
from hpcdet.ids import check_id
from hpcdet.link import connect
from hpcdet.paths import StatePaths
from hpcdet.protocol.messages import Activate, Cancel, JobUpdate, Kill, Pause, UpdateJobs
from hpcdet.views import curves as plots
from hpcdet.views import usage
from hpcdet.views.checkpoints import ranked_checkpoints
from hpcdet.views.cluster import cluster_view, daemon_view, site_scheduler
from hpcdet.views.experiments import describe_experiment, experiment_dict, experiment_rows
from hpcdet.views.logs import LEVELS, LogFilter, log_page
from hpcdet.views.queue import job_queue, scheduler_statuses
from hpcdet.views.tasks import task_rows
from hpcdet.views.trials import describe_trial, trial_dict, trial_metrics

if TYPE_CHECKING:
    from hpcdet.views.access import Queries

# What a POST may ask of an experiment, as the daemon link names it.
ACTIONS: dict[str, type[Pause | Activate | Cancel | Kill]] = {
    "pause": Pause, "activate": Activate, "cancel": Cancel, "kill": Kill}
# Log lines a page shows at first, the last of the log (`hpcdet trial logs` has them all).
LOG_PAGE = 2000


def api_routes(paths: StatePaths, store: Callable[[], Queries]) -> list[Route]:
    def experiments(request: Request) -> Response:
        return JSONResponse([{**r.to_dict(), "best": asdict(r.best) if r.best else None}
                             for r in experiment_rows(store(), with_best=True)])

    def experiment(request: Request) -> Response:
        exp_id = request.path_params["exp_id"]
        view = describe_experiment(store(), exp_id)
        return JSONResponse({
            "experiment": experiment_dict(view.experiment),
            "labels": list(view.experiment.labels),
            "config": view.config,
            "searcher": view.searcher,
            "best": asdict(view.best) if view.best else None,
            "usage": view.used.to_dict(),
            "metric_names": store().metric_names([t.trial.id for t in view.trials]),
            "trials": [{**trial_dict(t.trial), "searcher": t.searcher} for t in view.trials],
        })

    def curves(request: Request) -> Response:
        q = request.query_params
        group, metric = q.get("group"), q.get("metric")
        if not group or not metric:
            raise UsageError("curves need ?group=...&metric=...")
        trials = sorted(check_id("?trials=", t) for t in _ids(q, "trials")) \
            if "trials" in q else None
        found = plots.experiment_curves(store(), request.path_params["exp_id"], group, metric,
                                        trials)
        return JSONResponse([plots.curve_dict(c) for c in found])

    def rungs(request: Request) -> Response:
        return JSONResponse([{"length": r.length, "values": r.values}
                             for r in plots.asha_rungs(store(), request.path_params["exp_id"])])

    def trial(request: Request) -> Response:
        view = describe_trial(store(), request.path_params["trial_id"])
        slots = usage.slots_of(store().experiment(view.trial.experiment_id).stored_config)
        idle = usage.idle_gpus(paths, view.trial.experiment_id, view.runs)
        return JSONResponse({**view.to_dict(), "usage": usage.total(view.runs, slots).to_dict(),
                             "idle_gpus": [g.to_dict() for g in idle],
                             "metric_names": store().metric_names([view.trial.id])})

    def trial_curves(request: Request) -> Response:
        metric = request.query_params.get("metric")
        if not metric:
            raise UsageError("curves need ?metric=...")
        found = plots.trial_curves(store(), request.path_params["trial_id"], metric)
        return JSONResponse({group: plots.curve_dict(c) for group, c in found.items()})

    def metrics(request: Request) -> Response:
        reported = trial_metrics(store(), request.path_params["trial_id"],
                                 request.query_params.get("group") or None)
        return JSONResponse([{"group": m.group, "steps_completed": m.steps_completed,
                              "metrics": m.metrics} for m in reported.rows])

    def checkpoints(request: Request) -> Response:
        t = store().trial(request.path_params["trial_id"])
        found = ranked_checkpoints(store(), paths, t.experiment_id, trial_id=t.id)
        return JSONResponse([{
            "uuid": c.checkpoint.uuid, "steps_completed": c.checkpoint.steps_completed,
            "state": c.checkpoint.state, "reported": c.checkpoint.reported,
            "metric": c.metric, "files": c.files, "size": c.size,
            "metadata": c.checkpoint.metadata,
        } for c in found.checkpoints])

    def logs(request: Request) -> Response:
        q = request.query_params
        level = q.get("level") or None
        if level is not None and level not in LEVELS:
            raise UsageError(f"no log level {level!r}; one of {', '.join(LEVELS)}")
        ranks = _ids(q, "ranks")
        t = store().trial(request.path_params["trial_id"])
        cursor = _cursor(q.get("cursor") or "{}")
        records, cursor, omitted, skipped = log_page(paths, t.experiment_id, t.id, cursor,
                                                     LOG_PAGE)
        kept = LogFilter(rank_ids=ranks, level=level).apply(records)
        return JSONResponse({"lines": [r.to_dict() for r in kept], "cursor": cursor,
                             "omitted": omitted, "skipped_bytes": skipped})

    def queue(request: Request) -> Response:
        statuses, problem = scheduler_statuses(site_scheduler(paths))
        rows = job_queue(store(), statuses)
        return JSONResponse({"problem": problem, "jobs": [
            {**asdict(r), "state": r.state.value} for r in rows]})

    def tasks(request: Request) -> Response:
        rows = task_rows(store())
        # A notebook's page behind the door (the proxy gives it its token): where it runs.
        return JSONResponse([{**r.to_dict(), "url": f"/proxy/{r.id}/lab"
                              if r.kind == "notebook" and r.task.ended is None else None}
                             for r in rows])

    def cluster(request: Request) -> Response:
        view = cluster_view(site_scheduler(paths))
        return JSONResponse({**asdict(view), "daemon": daemon_view(paths)})

    def act(request: Request) -> Response:
        action, exp_id = request.path_params["action"], request.path_params["exp_id"]
        daemon = connect(paths)
        if action == "priority":
            priority = _priority(request.query_params.get("value"))
            said = daemon.send(UpdateJobs.of([JobUpdate(exp_id, "priority", priority)]))
        elif action in ACTIONS:
            said = daemon.send(ACTIONS[action](exp_id))
        else:
            return JSONResponse({"error": f"no action {action!r}; one of "
                                 f"{[*ACTIONS, 'priority']}"}, status_code=404)
        return JSONResponse({"said": said})

    return [Route(r.path, _checked(r.endpoint), methods=r.methods) for r in [
        Route("/api/experiments", experiments),
        Route("/api/experiments/{exp_id:int}", experiment),
        Route("/api/experiments/{exp_id:int}/curves", curves),
        Route("/api/experiments/{exp_id:int}/rungs", rungs),
        Route("/api/experiments/{exp_id:int}/{action:str}", act, methods=["POST"]),
        Route("/api/trials/{trial_id:int}", trial),
        Route("/api/trials/{trial_id:int}/metrics", metrics),
        Route("/api/trials/{trial_id:int}/curves", trial_curves),
        Route("/api/trials/{trial_id:int}/checkpoints", checkpoints),
        Route("/api/trials/{trial_id:int}/logs", logs),
        Route("/api/queue", queue),
        Route("/api/tasks", tasks),
        Route("/api/cluster", cluster),
    ]]



def _checked(handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
    """``handler``, refusing a path id no row can have with a 400 that names it."""
    @functools.wraps(handler)
    def checked(request: Request) -> Response:
        for name, value in request.path_params.items():
            if isinstance(value, int):
                check_id(name, value)
        return handler(request)
    return checked


def _ids(query: Any, name: str) -> frozenset[int]:
    """The comma-separated whole numbers of the query parameter ``name``."""
    text = query.get(name, "")
    try:
        found = frozenset(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        found = frozenset({-1})
    if any(not 0 <= i <= INT64_MAX for i in found):
        raise UsageError(f"?{name}= takes whole numbers separated by commas "
                         f"(like {name}=1,2), not {text[:80]!r}")
    return found


def _cursor(text: str) -> dict[str, int]:
    """The log cursor a page sends back: the ``cursor`` object the last answer gave."""
    try:
        cursor = json.loads(text)
    except ValueError:
        cursor = None
    if not isinstance(cursor, dict) or not all(
            isinstance(k, str) and type(v) is int and 0 <= v <= INT64_MAX
            for k, v in cursor.items()):
        raise UsageError("?cursor= takes the cursor object the last answer of this route "
                         f"gave (file name to offset), not {text[:80]!r}")
    return cursor


def _priority(value: Any) -> int:
    try:
        priority = int(value)
        if abs(priority) <= INT64_MAX:
            return priority
    except (TypeError, ValueError):
        pass
    raise UsageError(f"priority takes a whole number (?value=N), not {value!r}")
