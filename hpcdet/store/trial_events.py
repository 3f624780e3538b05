"""The events a trial reports besides its metrics (checkpoints, progress, status, metadata,
alerts, an early exit), each applied to its trial's row by a function of its type."""

from __future__ import annotations

import json
from typing import Callable

from sqlmodel import Session

from hpcdet.rundir.events import Event
from hpcdet.states import CheckpointState
from hpcdet.store.models import Checkpoint, Trial

Applier = Callable[[Session, Trial, int, Event], None]
MAX_ALERTS = 100


def _checkpoint(s: Session, trial: Trial, run_id: int, ev: Event) -> None:
    body = ev.body
    ckpt = s.get(Checkpoint, body["uuid"])
    # A checkpoint already known is a tombstone the journal left on a rebuild: it was
    # deleted; fill in its details and keep it deleted.
    deleted = ckpt is not None
    if ckpt is None:
        ckpt = Checkpoint(uuid=body["uuid"], trial_id=trial.id, experiment_id=trial.experiment_id,
                          run_id=run_id, steps_completed=0, reported=body["time"])
    ckpt.run_id, ckpt.steps_completed = run_id, int(body["steps_completed"])
    ckpt.metadata_json = json.dumps(body.get("metadata", {}))
    ckpt.resources_json = json.dumps(body.get("resources", {}))
    ckpt.reported = body["time"]
    s.add(ckpt)
    if not deleted:
        trial.latest_checkpoint = body["uuid"]
        trial.steps_completed = int(body["steps_completed"])


def _checkpoint_deleted(s: Session, trial: Trial, run_id: int, ev: Event) -> None:
    ckpt = s.get(Checkpoint, ev.body["uuid"])
    if ckpt is not None:
        ckpt.state = CheckpointState.DELETED
        s.add(ckpt)
    if trial.latest_checkpoint == ev.body["uuid"]:
        trial.latest_checkpoint = None


def _progress(s: Session, trial: Trial, run_id: int, ev: Event) -> None:
    trial.progress = float(ev.body["progress"])


def _status(s: Session, trial: Trial, run_id: int, ev: Event) -> None:
    trial.status = str(ev.body.get("status", ""))


def _metadata(s: Session, trial: Trial, run_id: int, ev: Event) -> None:
    # The trial sends the whole merged dict, so a later run's report replaces it.
    trial.metadata_json = json.dumps(ev.body.get("metadata", {}))


def _alert(s: Session, trial: Trial, run_id: int, ev: Event) -> None:
    alerts = json.loads(trial.alerts_json)
    alerts.append({k: ev.body.get(k) for k in ("title", "description", "level", "time")})
    trial.alerts_json = json.dumps(alerts[-MAX_ALERTS:])


def _early_exit(s: Session, trial: Trial, run_id: int, ev: Event) -> None:
    trial.early_exit = str(ev.body.get("reason", ""))


# Each event type but "metrics", which ``store_metrics`` stores a batch at a time, and
# "preempt_ack", which marks the run.
APPLIERS: dict[str, Applier] = {
    "checkpoint": _checkpoint,
    "checkpoint_deleted": _checkpoint_deleted,
    "progress": _progress,
    "status": _status,
    "metadata": _metadata,
    "alert": _alert,
    "early_exit": _early_exit,
}
