"""A trial as `trial describe` shows it, and its reported metrics (`trial metrics`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hpcdet.records import RunRecord as Run
    from hpcdet.records import TrialRecord as Trial
    from hpcdet.store.queries import Queries


@dataclass(frozen=True)
class MetricRow:
    group: str
    steps_completed: int
    run_id: int
    reported: float
    metrics: dict[str, Any]
    batch_metrics: list[dict[str, Any]] | None = None


_RUN_KEYS = ("run_id", "job_id", "state", "reason", "submitted", "ended", "exit_code", "outcome")


@dataclass(frozen=True)
class TrialView:
    trial: Trial
    runs: list[Run]

    @property
    def metadata(self) -> dict[str, Any]:
        """What the trial gave train.set_metadata()."""
        return self.trial.metadata

    @property
    def alerts(self) -> list[dict[str, Any]]:
        """Its core_context.alert() calls, oldest first."""
        return self.trial.alerts

    def to_dict(self) -> dict[str, Any]:
        """The stable form of ``trial describe --json``."""
        # Keys in the table's column order: the ORM's model_dump() orders them as it loaded
        # them, which changes with what the process imported before.
        return {**trial_dict(self.trial),
                "runs": [{k: getattr(r, k) for k in _RUN_KEYS} for r in self.runs]}


def trial_dict(t: Trial) -> dict[str, Any]:
    """A trial as the CLI's --json output and the SDK give it."""
    return {
        "id": t.id, "experiment_id": t.experiment_id, "state": t.state,
        "hparams": t.hparams, "trial_seed": t.trial_seed,
        "restarts": t.restarts, "steps_completed": t.steps_completed, "progress": t.progress,
        "status": t.status, "best_validation": t.best_validation,
        "latest_checkpoint": t.latest_checkpoint, "end_reason": t.end_reason,
        "started": t.started, "ended": t.ended,
        "metadata": t.metadata, "alerts": t.alerts,
    }


def describe_trial(store: Queries, trial_id: int) -> TrialView:
    return TrialView(store.trial(trial_id), store.runs([trial_id]))


@dataclass(frozen=True)
class TrialMetrics:
    rows: list[MetricRow]
    keys: list[str]  # every metric name, in the order they were first reported


def trial_metrics(store: Queries, trial_id: int, group: str | None = None) -> TrialMetrics:
    """What the trial reported (of one group, or all), in report order."""
    store.trial(trial_id)  # a NotFoundError that names the trial
    rows = [MetricRow(m.group, m.steps_completed, m.run_id, m.reported,
                      m.metrics, m.batch_metrics)
            for m in store.metrics(trial_id, group)]
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row.metrics if k not in keys]
    return TrialMetrics(rows, keys)
