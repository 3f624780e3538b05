"""Trial events applied to the database: metrics, checkpoints, progress, acknowledgements.

``Store.ingest_events`` commits the rows of a batch of events together with the byte offset
just past it, so a daemon killed at any instant neither loses nor doubles a row.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

from sqlmodel import Session

from hpcdet.rundir.exchange import Event
from hpcdet.states import CheckpointState
from hpcdet.store.models import Checkpoint, Run, Trial


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


@dataclass
class _Report:
    """One (group, step) row of a trial's metrics as a batch leaves it."""

    id: int | None  # its row, if it has one already
    run_id: int
    seq: int
    metrics: dict[str, Any]
    batch_metrics_json: str
    reported: float


def store_metrics(s: Session, trial: Trial, run: Run, events: list[Event], best: BestOf
                  ) -> None:
    """A batch's metric reports in a few statements rather than a few per report: reports of
    one (group, step) in one run merge, as Determined merges them (the trial refused
    conflicts); a later run's report of a step replaces the earlier run's after a resume."""
    if not events:
        return
    conn = s.connection()
    keys = {(e.body["group"], int(e.body["steps_completed"])) for e in events}
    rows: dict[tuple[str, int], _Report] = {}
    next_ordinal: dict[str, int] = {}
    for group in sorted({g for g, _ in keys}):
        steps = [x for g, x in keys if g == group]
        found = conn.exec_driver_sql(
            'SELECT id, steps_completed, run_id, seq, metrics_json, batch_metrics_json, '
            'reported FROM metric WHERE trial_id = ? AND "group" = ? '
            "AND steps_completed BETWEEN ? AND ?", (trial.id, group, min(steps), max(steps)))
        for id_, step, run_id, seq, metrics_json, batch_json, reported in found:
            if (group, step) in keys:
                rows[(group, step)] = _Report(id_, run_id, seq, json.loads(metrics_json),
                                              batch_json, reported)
        last = conn.exec_driver_sql(
            'SELECT max(ordinal) FROM metric WHERE trial_id = ? AND "group" = ?',
            (trial.id, group)).scalar()
        next_ordinal[group] = 0 if last is None else int(last) + 1
    changed: set[tuple[str, int]] = set()
    ordinals: dict[tuple[str, int], int] = {}
    for ev in events:
        body = ev.body
        key = (body["group"], int(body["steps_completed"]))
        batches = body.get("batch_metrics")
        batches_json = "" if batches is None else json.dumps(batches)
        row = rows.get(key)
        if row is not None and row.run_id == run.run_id:
            row.metrics = {**row.metrics, **body["metrics"]}
            row.batch_metrics_json = row.batch_metrics_json or batches_json
        elif row is not None:
            row.metrics, row.batch_metrics_json = dict(body["metrics"]), batches_json
            row.run_id, row.seq, row.reported = run.run_id, ev.seq, body["time"]
        else:
            rows[key] = _Report(None, run.run_id, ev.seq, dict(body["metrics"]), batches_json,
                                body["time"])
            ordinals[key] = next_ordinal[key[0]]
            next_ordinal[key[0]] += 1
        changed.add(key)
        if key[0] == "validation":
            value = _as_float(body["metrics"].get(best.metric))
            if value is not None and best.better(value, trial.best_validation):
                trial.best_validation = value
    new = [(trial.id, r.run_id, r.seq, k[0], k[1], ordinals[k], json.dumps(r.metrics),
            r.batch_metrics_json, r.reported)
           for k, r in rows.items() if k in changed and r.id is None]
    if new:
        conn.exec_driver_sql(
            'INSERT INTO metric (trial_id, run_id, seq, "group", steps_completed, ordinal, '
            "metrics_json, batch_metrics_json, reported) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            new)
    old = [(r.run_id, r.seq, json.dumps(r.metrics), r.batch_metrics_json, r.reported, r.id)
           for k, r in rows.items() if k in changed and r.id is not None]
    if old:
        conn.exec_driver_sql(
            "UPDATE metric SET run_id = ?, seq = ?, metrics_json = ?, batch_metrics_json = ?, "
            "reported = ? WHERE id = ?", old)


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


# Each event type but "metrics", which ``store_metrics`` stores a batch at a time.
APPLIERS: dict[str, Applier] = {
    "checkpoint": _checkpoint,
    "checkpoint_deleted": _checkpoint_deleted,
    "progress": _progress,
    "status": _status,
    "metadata": _metadata,
    "alert": _alert,
    "preempt_ack": _preempt_ack,
    "early_exit": _early_exit,
}
