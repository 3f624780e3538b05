"""A trial's reported metrics, as `trial metrics` shows them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hpcdet.store.repository import Store


@dataclass(frozen=True)
class MetricRow:
    group: str
    steps_completed: int
    run_id: int
    reported: float
    metrics: dict[str, Any]


@dataclass(frozen=True)
class TrialMetrics:
    rows: list[MetricRow]
    keys: list[str]  # every metric name, in the order they were first reported


def trial_metrics(store: Store, trial_id: int, group: str | None = None) -> TrialMetrics:
    """What the trial reported (of one group, or all), in report order."""
    store.trial(trial_id)  # a NotFoundError that names the trial
    rows = [MetricRow(m.group, m.steps_completed, m.run_id, m.reported,
                      json.loads(m.metrics_json)) for m in store.metrics(trial_id, group)]
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row.metrics if k not in keys]
    return TrialMetrics(rows, keys)
