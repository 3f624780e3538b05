"""Exactly-once ingest of trial event logs into the database.

The rows produced by a batch of events and the byte offset just past that batch are committed
in one transaction, so a daemon killed at any instant neither loses nor doubles a row.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from hpcdet.config import SearcherConfig
from hpcdet.exchange import Event, read_event_batch
from hpcdet.states import CheckpointState
from hpcdet.store.models import Checkpoint, Metric, Run, Trial
from hpcdet.store.repository import Store


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


class Ingestor:
    def __init__(self, store: Store) -> None:
        self.store = store

    def ingest(
        self, run_key: tuple[int, int], events_path: Path, searcher: SearcherConfig
    ) -> list[Event]:
        """Ingest the new events of one run; returns them."""
        trial_id, run_id = run_key
        with self.store.session() as s:
            run = s.exec(select(Run).where(Run.trial_id == trial_id, Run.run_id == run_id)).one()
            try:
                if events_path.stat().st_size <= run.event_offset:
                    return []
            except FileNotFoundError:
                return []
            batch = read_event_batch(events_path, run.event_offset)
            # Past corrupt lines too (read_event_batch logged them), so each is reported once.
            run.event_offset = batch.end_offset
            s.add(run)
            events = batch.events
            if not events:
                return []
            trial = s.get(Trial, trial_id)
            assert trial is not None
            for ev in events:
                _APPLY.get(ev.type, _ignore)(s, trial, run, ev, searcher)
            run.event_seq = events[-1].seq
            s.add(trial)
        return events


def _ignore(s: Session, trial: Trial, run: Run, ev: Event, searcher: SearcherConfig) -> None:
    pass


def _metrics(s: Session, trial: Trial, run: Run, ev: Event, searcher: SearcherConfig) -> None:
    body = ev.body
    group, steps = body["group"], int(body["steps_completed"])
    existing = s.exec(
        select(Metric).where(
            Metric.trial_id == trial.id, Metric.group == group, Metric.steps_completed == steps
        )
    ).first()
    if existing is not None and existing.run_id == run.run_id:
        # Determined merges reports of the same (group, step); the trial refused conflicts.
        merged = {**json.loads(existing.metrics_json), **body["metrics"]}
        existing.metrics_json = json.dumps(merged)
        s.add(existing)
    elif existing is not None:
        # A later run re-reported a step after resuming: its values replace the old run's.
        existing.metrics_json = json.dumps(body["metrics"])
        existing.run_id, existing.seq, existing.reported = run.run_id, ev.seq, body["time"]
        s.add(existing)
    else:
        s.add(
            Metric(
                trial_id=trial.id, run_id=run.run_id, seq=ev.seq, group=group,
                steps_completed=steps, metrics_json=json.dumps(body["metrics"]),
                reported=body["time"],
            )
        )
    if group == "validation":
        value = _as_float(body["metrics"].get(searcher.metric))
        if value is not None:
            best = trial.best_validation
            smaller = searcher.smaller_is_better
            if best is None or (value < best if smaller else value > best):
                trial.best_validation = value


def _checkpoint(s: Session, trial: Trial, run: Run, ev: Event, searcher: SearcherConfig) -> None:
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
    s: Session, trial: Trial, run: Run, ev: Event, searcher: SearcherConfig
) -> None:
    ckpt = s.get(Checkpoint, ev.body["uuid"])
    if ckpt is not None:
        ckpt.state = CheckpointState.DELETED
        s.add(ckpt)
    if trial.latest_checkpoint == ev.body["uuid"]:
        trial.latest_checkpoint = None


def _progress(s: Session, trial: Trial, run: Run, ev: Event, searcher: SearcherConfig) -> None:
    trial.progress = float(ev.body["progress"])


def _early_exit(s: Session, trial: Trial, run: Run, ev: Event, searcher: SearcherConfig) -> None:
    trial.early_exit = str(ev.body.get("reason", ""))


def _preempt_ack(s: Session, trial: Trial, run: Run, ev: Event, searcher: SearcherConfig) -> None:
    run.preempt_acked = True


_APPLY = {
    "metrics": _metrics,
    "checkpoint": _checkpoint,
    "checkpoint_deleted": _checkpoint_deleted,
    "progress": _progress,
    "preempt_ack": _preempt_ack,
    "early_exit": _early_exit,
}
