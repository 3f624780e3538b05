"""`hpcdet checkpoint ...`: list, download and delete checkpoints."""

import json
from collections.abc import Callable
from contextvars import ContextVar
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from hpcdet.cli.common import (
    ExperimentId,
    paths,
    print_csv,
    print_json,
    read_store,
    table,
    when,
)
from hpcdet.errors import UsageError
from hpcdet.link import connect
from hpcdet.protocol.messages import DeleteCheckpoint
from hpcdet.views import lookups

if TYPE_CHECKING:
    from hpcdet.records import CheckpointRecord as Checkpoint

app = typer.Typer(no_args_is_help=True)

# A download run for a laptop (`hpcdet relay download`) lists the files for the laptop to
# fetch over SFTP instead of copying them here.
# Called as copy_checkpoint is: (store, paths, uuid, output_dir) -> where the files go.
FETCH: "ContextVar[Optional[Callable[..., Path]]]" = ContextVar("fetch", default=None)

_DOWNLOAD_COLUMNS = ("Experiment ID", "Trial ID", "Steps Completed", "Report Time",
                     "Checkpoint UUID", "Validation Metrics", "Metadata")


@app.command("list")
def list_(
    experiment_id: ExperimentId,
    top: Annotated[Optional[int], typer.Option(
        "--best", min=1, help="Only the K best by the searcher metric, best first."
    )] = None,
    csv: Annotated[bool, typer.Option("--csv")] = False,
) -> None:
    """Completed checkpoints of an experiment, with the searcher metric at each one's step.

    A checkpoint's validation metric is the searcher metric its trial reported at the
    checkpoint's steps; --best leaves out checkpoints without one.
    """
    from hpcdet.views.checkpoints import ranked_checkpoints

    listed = ranked_checkpoints(read_store(paths()), paths(), experiment_id, top)
    rows = [[c.checkpoint.trial_id, c.checkpoint.steps_completed, c.checkpoint.uuid,
             when(c.checkpoint.reported), c.checkpoint.state, c.metric,
             f"{c.files} files, {c.size} B"] for c in listed.checkpoints]
    # Each checkpoint is the directory <storage>/<uuid>; the storage is shown once.
    cols = ["Trial ID", "Steps Completed", "UUID", "Report Time", "State", "Validation Metric",
            "Resources"]
    if csv:
        print_csv(cols, rows)
        return
    table(cols, rows, title=f"Checkpoint storage: {listed.storage}", fold=True)


class Mode(str, Enum):
    """Determined's download modes. hpcdet has no master: every download is direct."""

    direct = "direct"
    auto = "auto"
    master = "master"


@app.command("download")
def download(
    uuid: str,
    output_dir: Annotated[Optional[Path], typer.Option(
        "--output-dir", "-o", help="Where to put the files (default: checkpoints/UUID)."
    )] = None,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Print only the local path."
    )] = False,
    mode: Annotated[Mode, typer.Option(
        "--mode", help="direct or auto: straight from the checkpoint storage (hpcdet has no "
        "master to download through)."
    )] = Mode.auto,
) -> None:
    """Copy a completed checkpoint from its storage into a local directory.

    The storage is a shared filesystem that this host mounts, as the compute nodes do.
    """
    if mode == Mode.master:
        raise UsageError("--mode master downloads through Determined's master, which hpcdet "
                         "does not have; use --mode direct (or auto): this host reads the "
                         "checkpoint storage itself")
    download_checkpoint(uuid, output_dir, quiet)


def download_checkpoint(uuid: str, output_dir: Optional[Path], quiet: bool) -> Path:
    """What `checkpoint download` does, for the trial's and the experiment's downloads too."""
    from hpcdet.views.checkpoints import checkpoint_validation, copy_checkpoint

    store = read_store(paths())
    dest = (FETCH.get() or copy_checkpoint)(store, paths(), uuid, output_dir)
    if quiet:
        print(dest)
        return dest
    print("Local checkpoint path:")
    print(dest)
    print()
    ckpt = lookups.checkpoint(store, uuid)
    _describe(ckpt, checkpoint_validation(store, ckpt))
    return dest


@app.command("describe")
def describe(
    uuid: str,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """A checkpoint: its experiment and trial, steps, time, validation metrics, metadata."""
    from hpcdet.views.checkpoints import checkpoint_validation

    store = read_store(paths())
    c = lookups.checkpoint(store, uuid)
    validation = checkpoint_validation(store, c)
    if as_json:
        print_json({"uuid": c.uuid, "experiment_id": c.experiment_id, "trial_id": c.trial_id,
                    "steps_completed": c.steps_completed, "report_time": c.reported,
                    "state": c.state, "validation_metrics": validation,
                    "metadata": c.metadata, "resources": c.resources})
        return
    _describe(c, validation)


def _describe(c: "Checkpoint", validation: dict[str, Any]) -> None:
    table(_DOWNLOAD_COLUMNS, [[c.experiment_id, c.trial_id, c.steps_completed,
                               when(c.reported), c.uuid, json.dumps(validation),
                               json.dumps(c.metadata)]], fold=True)


@app.command("delete")
def delete(
    uuids: Annotated[str, typer.Argument(help="UUIDs, separated by commas.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask first.")] = False,
) -> None:
    """Delete checkpoints' files from storage; the daemon does it and records it."""
    listed = [u.strip() for u in uuids.split(",") if u.strip()]
    if not listed:
        raise UsageError("name at least one checkpoint UUID")
    if not yes:
        typer.confirm("Deleting checkpoints removes their files from the checkpoint storage "
                      "for good. Do you still want to proceed?", abort=True)
    client = connect(paths())
    for uuid in listed:
        print(client.send(DeleteCheckpoint(uuid)))
