"""Checkpoints ranked by the searcher metric, and where a checkpoint's files are."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcdet.checkpoint_gc import CheckpointRecord, ValidationRecord, best, latest, rank
from hpcdet.config import ExperimentConfig
from hpcdet.errors import NotFoundError, StateError
from hpcdet.paths import StatePaths
from hpcdet.states import CheckpointState
from hpcdet.store.models import Checkpoint, Experiment
from hpcdet.store.repository import Store


@dataclass(frozen=True)
class RankedCheckpoint:
    checkpoint: Checkpoint
    metric: float | None  # the searcher metric its trial reported at its steps

    @property
    def files(self) -> int:
        return len(json.loads(self.checkpoint.resources_json))

    @property
    def size(self) -> int:
        return sum(int(v) for v in json.loads(self.checkpoint.resources_json).values())


@dataclass(frozen=True)
class CheckpointList:
    storage: Path  # each checkpoint is the directory <storage>/<uuid>
    checkpoints: list[RankedCheckpoint]


@dataclass(frozen=True)
class StoredCheckpoint:
    checkpoint: Checkpoint
    source: Path  # its directory in the checkpoint storage
    validation: dict[str, Any]  # the validation metrics reported at its steps ({} if none)


def ranked_checkpoints(
    store: Store, paths: StatePaths, exp_id: int, top: int | None = None, *,
    trial_id: int | None = None, sort_by: str | None = None,
    smaller_is_better: bool | None = None, ordered: bool = False,
) -> CheckpointList:
    """The experiment's (or one trial's) completed checkpoints in ``rank`` order; with
    ``top``, only the best ``top`` by the searcher metric (or ``sort_by``), best first, those
    without the metric left out. ``ordered``: all of them, best first, those without the
    metric after the others (latest first), as Determined's ``list_checkpoints`` gives them;
    ``top`` then keeps the first ``top``."""
    exp = store.experiment(exp_id)
    cfg = _config(exp)
    metric = sort_by or cfg.searcher.metric
    smaller = cfg.searcher.smaller_is_better if smaller_is_better is None else smaller_is_better
    ckpts = {c.uuid: c for c in store.checkpoints(exp_id=exp_id, trial_id=trial_id)}
    validations = [
        ValidationRecord(m.trial_id, m.steps_completed, json.loads(m.metrics_json))
        for m in store.experiment_metrics(exp_id, "validation")
    ]
    records = [CheckpointRecord(c.uuid, c.trial_id, c.steps_completed, c.reported)
               for c in ckpts.values()]
    ranked = rank(records, validations, metric)
    if ordered:
        ranked = [*best(ranked, smaller), *latest(r for r in ranked if r.metric is None)]
    elif top is not None:
        ranked = best(ranked, smaller)
    if top is not None:
        ranked = ranked[:top]
    return CheckpointList(cfg.checkpoint_dir(paths.default_checkpoints()),
                          [RankedCheckpoint(ckpts[r.checkpoint.uuid], r.metric) for r in ranked])


def stored_checkpoint(store: Store, paths: StatePaths, uuid: str) -> StoredCheckpoint:
    """A completed checkpoint whose files are in its storage, to copy from."""
    ckpt = store.checkpoint(uuid)
    if ckpt.state != CheckpointState.COMPLETED:
        raise StateError(
            f"checkpoint {uuid} is {ckpt.state}; only COMPLETED checkpoints can be downloaded"
        )
    cfg = _config(store.experiment(ckpt.experiment_id))
    source = cfg.checkpoint_dir(paths.default_checkpoints()) / uuid
    if not source.is_dir():
        raise NotFoundError(f"checkpoint {uuid} is missing from its storage: no {source}")
    return StoredCheckpoint(ckpt, source, checkpoint_validation(store, ckpt))


def copy_checkpoint(store: Store, paths: StatePaths, uuid: str, dest: Path | None) -> Path:
    """Copy a completed checkpoint's files to ``dest`` (default ``checkpoints/<uuid>``)."""
    stored = stored_checkpoint(store, paths, uuid)
    target = dest if dest is not None else Path("checkpoints") / uuid
    shutil.copytree(stored.source, target, dirs_exist_ok=True)
    return target


def checkpoint_validation(store: Store, ckpt: Checkpoint) -> dict[str, Any]:
    """The validation metrics its trial reported at its steps ({} if none)."""
    merged: dict[str, Any] = {}
    for m in store.metrics(ckpt.trial_id, "validation"):
        if m.steps_completed == ckpt.steps_completed:
            merged.update(json.loads(m.metrics_json))
    return merged


def _config(exp: Experiment) -> ExperimentConfig:
    return ExperimentConfig.from_dict(json.loads(exp.config_json))
