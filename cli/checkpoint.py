"""`hpcdet checkpoint ...`: list, download and delete checkpoints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from hpcdet.cli.common import ExperimentId, paths, read_store, table, when
from hpcdet.client import connect
from hpcdet.store.models import Checkpoint
from hpcdet.views.checkpoints import ranked_checkpoints, stored_checkpoint

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
    listed = ranked_checkpoints(read_store(paths()), paths(), experiment_id, top)
    rows = [[c.checkpoint.trial_id, c.checkpoint.steps_completed, c.checkpoint.uuid,
             when(c.checkpoint.reported), c.checkpoint.state, c.metric,
             f"{c.files} files, {c.size} B"] for c in listed.checkpoints]
    # Each checkpoint is the directory <storage>/<uuid>; the storage is shown once.
    table(["Trial ID", "Steps Completed", "UUID", "Report Time", "State",
           "Validation Metric", "Resources"], rows, title=f"Checkpoint storage: {listed.storage}",
          fold=True)


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
    stored = stored_checkpoint(read_store(paths()), paths(), uuid)
    dest = output_dir if output_dir is not None else Path("checkpoints") / uuid
    shutil.copytree(stored.source, dest, dirs_exist_ok=True)
    if quiet:
        print(dest)
        return
    print("Local checkpoint path:")
    print(dest)
    print()
    _describe(stored.checkpoint, stored.validation)


def _describe(c: Checkpoint, validation: dict[str, Any]) -> None:
    table(_DOWNLOAD_COLUMNS, [[c.experiment_id, c.trial_id, c.steps_completed,
                               when(c.reported), c.uuid, json.dumps(validation),
                               c.metadata_json]], fold=True)


@app.command("delete")
def delete(uuid: str) -> None:
    """Delete a checkpoint's files from storage; the daemon does it and records it."""
    print(connect(paths()).delete_checkpoint(uuid))
