"""An experiment's metrics as the web UI plots them: curves of one metric over its trials
(thinned to a few hundred points each), and the ASHA rungs its trials reached."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpcdet.search.asha import rung_lengths
from hpcdet.store.queries import Queries

# Points per curve, and in all: about what a plot's width in pixels can show, and what the
# browser draws at once without lag (200 trials get 200 points each).
CURVE_POINTS = 500
TOTAL_POINTS = 40_000


@dataclass(frozen=True)
class Curve:
    trial_id: int
    steps: list[int]
    values: list[float | None]


def experiment_curves(store: Queries, exp_id: int, group: str, metric: str,
                      trial_ids: list[int] | None = None) -> list[Curve]:
    """The ``metric`` of ``group`` reports per trial (of those given, else all), in order,
    each thinned to the share of TOTAL_POINTS one of the experiment's trials gets (50 to
    500), whether all or some are asked for."""
    every = [t.id for t in store.trials(exp_id)]
    known = set(every)
    ids = every if trial_ids is None else [t for t in trial_ids if t in known]
    points = max(50, min(CURVE_POINTS, TOTAL_POINTS // max(1, len(every))))
    return _curves(store.metric_series(ids, group, metric, points))


def trial_curves(store: Queries, trial_id: int, metric: str) -> dict[str, Curve]:
    """The ``metric`` in each group of the trial's reports, thinned to CURVE_POINTS."""
    store.trial(trial_id)  # a NotFoundError that names the trial
    return {group: curve
            for group, names in store.metric_names([trial_id]).items() if metric in names
            for curve in _curves(store.metric_series([trial_id], group, metric, CURVE_POINTS))}


def _curves(series: list[tuple[int, int, Any]]) -> list[Curve]:
    curves: dict[int, Curve] = {}
    for trial_id, step, value in series:
        curve = curves.setdefault(trial_id, Curve(trial_id, [], []))
        curve.steps.append(step)
        curve.values.append(value)
    return list(curves.values())


@dataclass(frozen=True)
class Rung:
    length: int  # in the searcher's time unit (max_time's, or max_length's)
    # trial id -> the searcher metric at its first validation at or past the rung
    values: dict[int, float]


def asha_rungs(store: Queries, exp_id: int) -> list[Rung]:
    """The rungs of an adaptive_asha experiment's brackets, shortest first, and the searcher
    metric of each trial that got there; [] for other searchers."""
    searcher = store.experiment(exp_id).config.searcher
    lengths = rung_lengths(searcher)
    if not lengths:
        return []
    trial_ids = [t.id for t in store.trials(exp_id)]
    time_metric = searcher.time_metric if searcher.max_time is not None else None
    curve = _points(store, trial_ids, searcher.metric, time_metric)
    rungs = []
    for length in lengths:
        values = {}
        for t in trial_ids:
            past = [v for x, v in curve.get(t, []) if x >= length]
            if past:
                values[t] = past[0]
        rungs.append(Rung(length, values))
    return rungs


def _points(store: Queries, trial_ids: list[int], metric: str, time_metric: str | None
            ) -> dict[int, list[tuple[float, float]]]:
    """(time, metric) of every validation per trial: time is ``time_metric``'s value in the
    report, or its steps completed."""
    values = store.metric_series(trial_ids, "validation", metric, points=1 << 30)
    times = (store.metric_series(trial_ids, "validation", time_metric, points=1 << 30)
             if time_metric else [(t, x, float(x)) for t, x, _ in values])
    out: dict[int, list[tuple[float, float]]] = {}
    for (t, _, value), (_, _, when) in zip(values, times):
        if value is not None and when is not None:
            out.setdefault(t, []).append((float(when), float(value)))
    return out


def curve_dict(c: Curve) -> dict[str, Any]:
    return {"trial_id": c.trial_id, "steps": c.steps, "values": c.values}
