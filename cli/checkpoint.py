"""`hpcdet checkpoint ...`: list, download and delete checkpoints."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from hpcdet.checkpoint_gc import CheckpointRecord, ValidationRecord, best, rank
from hpcdet.cli.common import ExperimentId, paths, print_json, read_store, table, when
from hpcdet.config import ExperimentConfig
from hpcdet.daemon import process
from hpcdet.daemon.jobspec import checkpoint_dir
from hpcdet.errors import NotFoundError, StateError
from hpcdet.states import CheckpointState
from hpcdet.store.models import Checkpoint, Experiment
from hpcdet.store.repository import Store

app = typer.Typer(no_args_is_help=True)

_DOWNLOAD_COLUMNS = ("Experiment ID", "Trial ID", "Steps Completed", "Report Time",
                     "Checkpoint UUID", "Validation Metrics", "Metadata")


@app.command("list")
def list_(
    experiment_id: ExperimentId,
    top: Annotated[Optional[int], typer.Option(
        "--best", min=1, help="Only the K best by the searcher metric, best first."
    )] = None,
) -> None:
    """Completed checkpoints of an experiment, with the searcher metric at each one's step.

    A checkpoint's validation metric is the searcher metric its trial reported at the
    checkpoint's steps; --best leaves out checkpoints without one.
    """
    store = read_store(paths())
    exp = store.experiment(experiment_id)
    cfg = _config(exp)
    base = checkpoint_dir(cfg, paths())
    ckpts = {c.uuid: c for c in store.checkpoints(exp_id=experiment_id)}
    ranked = rank([_record(c) for c in ckpts.values()], _validations(store, experiment_id),
                  cfg.searcher.metric)
    if top is not None:
        ranked = best(ranked, cfg.searcher.smaller_is_better)[:top]
    rows = [_list_row(ckpts[r.checkpoint.uuid], r.metric) for r in ranked]
    # Each checkpoint is the directory <storage>/<uuid>; the storage is shown once.
    table(["Trial ID", "Steps Completed", "UUID", "Report Time", "State",
           "Validation Metric", "Resources"], rows, title=f"Checkpoint storage: {base}",
          fold=True)


def _list_row(c: Checkpoint, metric: float | None) -> list[Any]:
    resources = json.loads(c.resources_json)
    size = sum(int(v) for v in resources.values())
    return [c.trial_id, c.steps_completed, c.uuid, when(c.reported), c.state, metric,
            f"{len(resources)} files, {size} B"]


@app.command("download")
def download(
    uuid: str,
    output_dir: Annotated[Optional[Path], typer.Option(
        "--output-dir", "-o", help="Where to put the files (default: checkpoints/UUID)."
    )] = None,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Print only the local path."
    )] = False,
) -> None:
    """Copy a completed checkpoint from its storage into a local directory.

    The storage is a shared filesystem that this host mounts, as the compute nodes do.
    """
    store = read_store(paths())
    ckpt = store.checkpoint(uuid)
    if ckpt.state != CheckpointState.COMPLETED:
        raise StateError(
            f"checkpoint {uuid} is {ckpt.state}; only COMPLETED checkpoints can be downloaded"
        )
    exp = store.experiment(ckpt.experiment_id)
    source = checkpoint_dir(_config(exp), paths()) / uuid
    if not source.is_dir():
        raise NotFoundError(f"checkpoint {uuid} is missing from its storage: no {source}")
    dest = output_dir if output_dir is not None else Path("checkpoints") / uuid
    shutil.copytree(source, dest, dirs_exist_ok=True)
    if quiet:
        print(dest)
        return
    print("Local checkpoint path:")
    print(dest)
    print()
    _describe(ckpt, _validation_at(store, ckpt))


def _describe(c: Checkpoint, validation: dict[str, Any]) -> None:
    table(_DOWNLOAD_COLUMNS, [[c.experiment_id, c.trial_id, c.steps_completed,
                               when(c.reported), c.uuid, json.dumps(validation),
                               c.metadata_json]], fold=True)


@app.command("delete")
def delete(uuid: str) -> None:
    """Delete a checkpoint's files from storage; the daemon does it and records it."""
    result = process.call(paths(), "delete_checkpoint", {"uuid": uuid})
    if isinstance(result, str):
        print(result)
    else:
        print_json(result)


def _config(exp: Experiment) -> ExperimentConfig:
    return ExperimentConfig.from_dict(json.loads(exp.config_json))


def _record(c: Checkpoint) -> CheckpointRecord:
    return CheckpointRecord(c.uuid, c.trial_id, c.steps_completed, c.reported)


def _validations(store: Store, exp_id: int) -> Sequence[ValidationRecord]:
    return [
        ValidationRecord(m.trial_id, m.steps_completed, json.loads(m.metrics_json))
        for m in store.experiment_metrics(exp_id, "validation")
    ]


def _validation_at(store: Store, c: Checkpoint) -> dict[str, Any]:
    """The validation metrics the trial reported at the checkpoint's steps ({} if none)."""
    merged: dict[str, Any] = {}
    for m in store.metrics(c.trial_id, "validation"):
        if m.steps_completed == c.steps_completed:
            merged.update(json.loads(m.metrics_json))
    return merged

