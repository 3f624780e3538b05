"""Trial events applied to the database: metrics, checkpoints, progress, acknowledgements.

``Store.ingest_events`` commits the rows of a batch of events together with the byte offset
just past it, so a daemon killed at any instant neither loses nor doubles a row.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

from sqlmodel import Session, func, select

from hpcdet.rundir.exchange import Event
from hpcdet.states import CheckpointState
from hpcdet.store.models import Checkpoint, Metric, Run, Trial


@dataclass(frozen=True)
class BestOf:
    """Which validation metric makes a trial's best, and which way."""

    metric: str
    smaller_is_better: bool = True

    def better(self, value: float, best: float | None) -> bool:
        return best is None or (value < best if self.smaller_is_better else value > best)


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


Applier = Callable[[Session, Trial, Run, Event, "BestOf"], None]

# A trial that alerts in a loop must not grow its row without bound: the newest are kept.
MAX_ALERTS = 100


def _ignore(s: Session, trial: Trial, run: Run, ev: Event, best: BestOf) -> None:
    pass


def _metrics(s: Session, trial: Trial, run: Run, ev: Event, best: BestOf) -> None:
    body = ev.body
    group, steps = body["group"], int(body["steps_completed"])
    existing = s.exec(
        select(Metric).where(
            Metric.trial_id == trial.id, Metric.group == group, Metric.steps_completed == steps
        )
    ).first()
    batches = body.get("batch_metrics")
    batches_json = "" if batches is None else json.dumps(batches)
    if existing is not None and existing.run_id == run.run_id:
        # Determined merges reports of the same (group, step); the trial refused conflicts.
        merged = {**json.loads(existing.metrics_json), **body["metrics"]}
        existing.metrics_json = json.dumps(merged)
        existing.batch_metrics_json = existing.batch_metrics_json or batches_json
        s.add(existing)
    elif existing is not None:
        # A later run re-reported a step after resuming: its values replace the old run's.
        existing.metrics_json = json.dumps(body["metrics"])
        existing.batch_metrics_json = batches_json
        existing.run_id, existing.seq, existing.reported = run.run_id, ev.seq, body["time"]
        s.add(existing)
    else:
        last = s.exec(select(func.max(Metric.ordinal)).where(
            Metric.trial_id == trial.id, Metric.group == group)).one()
        s.add(
            Metric(
                trial_id=trial.id, run_id=run.run_id, seq=ev.seq, group=group,
                steps_completed=steps, ordinal=0 if last is None else last + 1,
                metrics_json=json.dumps(body["metrics"]), batch_metrics_json=batches_json,
                reported=body["time"],
            )
        )
    if group == "validation":
        value = _as_float(body["metrics"].get(best.metric))
        if value is not None and best.better(value, trial.best_validation):
            trial.best_validation = value


def _checkpoint(s: Session, trial: Trial, run: Run, ev: Event, best: BestOf) -> None:
    body = ev.body
    ckpt = s.get(Checkpoint, body["uuid"])
    # A checkpoint already known is a tombstone the journal left on a rebuild: it was
    # deleted; fill in its details and keep it deleted.
    deleted = ckpt is not None
    if ckpt is None:
        ckpt = Checkpoint(uuid=body["uuid"], trial_id=trial.id, experiment_id=trial.experiment_id,
                          run_id=run.run_id, steps_completed=0, reported=body["time"])
    ckpt.run_id, ckpt.steps_completed = run.run_id, int(body["steps_completed"])
    ckpt.metadata_json = json.dumps(body.get("metadata", {}))
    ckpt.resources_json = json.dumps(body.get("resources", {}))
    ckpt.reported = body["time"]
    s.add(ckpt)
    if not deleted:
        trial.latest_checkpoint = body["uuid"]
        trial.steps_completed = int(body["steps_completed"])


def _checkpoint_deleted(
    s: Session, trial: Trial, run: Run, ev: Event, best: BestOf
) -> None:
    ckpt = s.get(Checkpoint, ev.body["uuid"])
    if ckpt is not None:
        ckpt.state = CheckpointState.DELETED
        s.add(ckpt)
    if trial.latest_checkpoint == ev.body["uuid"]:
        trial.latest_checkpoint = None


def _progress(s: Session, trial: Trial, run: Run, ev: Event, best: BestOf) -> None:
    trial.progress = float(ev.body["progress"])


def _status(s: Session, trial: Trial, run: Run, ev: Event, best: BestOf) -> None:
    trial.status = str(ev.body.get("status", ""))


def _metadata(s: Session, trial: Trial, run: Run, ev: Event, best: BestOf) -> None:
    # The trial sends the whole merged dict, so a later run's report replaces it.
    trial.metadata_json = json.dumps(ev.body.get("metadata", {}))


def _alert(s: Session, trial: Trial, run: Run, ev: Event, best: BestOf) -> None:
    alerts = json.loads(trial.alerts_json)
    alerts.append({k: ev.body.get(k) for k in ("title", "description", "level", "time")})
    trial.alerts_json = json.dumps(alerts[-MAX_ALERTS:])


def _early_exit(s: Session, trial: Trial, run: Run, ev: Event, best: BestOf) -> None:
    trial.early_exit = str(ev.body.get("reason", ""))


def _preempt_ack(s: Session, trial: Trial, run: Run, ev: Event, best: BestOf) -> None:
    run.preempt_acked = True


APPLIERS: dict[str, Applier] = {
    "metrics": _metrics,
    "checkpoint": _checkpoint,
    "checkpoint_deleted": _checkpoint_deleted,
    "progress": _progress,
    "status": _status,
    "metadata": _metadata,
    "alert": _alert,
    "preempt_ack": _preempt_ack,
    "early_exit": _early_exit,
}
