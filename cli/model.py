"""`hpcdet model ...`: the model registry (Determined's `det model`), and a version's
download."""

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from hpcdet.cli.common import paths, print_json, read_store, table, when
from hpcdet.errors import UsageError
from hpcdet.link import connect
from hpcdet.protocol.messages import CreateModel, RegisterVersion

app = typer.Typer(no_args_is_help=True)

_VERSION_COLUMNS = ("Version", "Checkpoint UUID", "Experiment ID", "Trial ID",
                    "Steps Completed", "Creation Time")


@app.command("create")
def create(
    name: str,
    description: Annotated[str, typer.Option("--description", "-d")] = "",
    metadata: Annotated[Optional[str], typer.Option(
        "--metadata", help="A JSON object stored with the model.")] = None,
) -> None:
    """Create a model of the registry, to register checkpoints as its versions."""
    meta = {}
    if metadata is not None:
        try:
            meta = json.loads(metadata)
        except json.JSONDecodeError as e:
            raise UsageError(f"--metadata is not JSON ({e}); give an object, e.g. "
                             "--metadata '{\"task\": \"mnist\"}'") from None
        if not isinstance(meta, dict):
            raise UsageError("--metadata is a JSON object, e.g. --metadata '{\"task\": 1}'")
    print(connect(paths()).send(CreateModel(name, description, meta or None)))


@app.command("list")
def list_(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The registry's models, by name."""
    from hpcdet.views.models import model_dict, models

    listed = models(read_store(paths()))
    if as_json:
        print_json([model_dict(m) for m in listed])
        return
    table(("Name", "Description", "Versions", "Latest Version", "Creation Time"),
          [[m.name, m.description, len(m.versions),
            m.versions[-1].version if m.versions else "", when(m.created)] for m in listed])


@app.command("describe")
def describe(
    name: str,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """A model and its versions."""
    from hpcdet.views.models import model, model_dict

    m = model(read_store(paths()), name)
    if as_json:
        print_json(model_dict(m))
        return
    table(("Name", "Description", "Metadata", "Creation Time"),
          [[m.name, m.description, json.dumps(m.metadata), when(m.created)]])
    print()
    table(_VERSION_COLUMNS, [[v.version, v.uuid, v.experiment_id, v.trial_id,
                              v.steps_completed, when(v.registered)] for v in m.versions],
          fold=True)


@app.command("register-version")
def register_version(name: str, checkpoint_uuid: str) -> None:
    """Register a completed checkpoint as the model's next version; checkpoint GC keeps it."""
    version = connect(paths()).send(RegisterVersion(name, checkpoint_uuid))
    print(f"Registered checkpoint {checkpoint_uuid} as version {version} of model {name!r}")


@app.command("download")
def download(
    name: str,
    version: Annotated[Optional[int], typer.Option(
        "--version", help="The version (default: the latest).")] = None,
    output_dir: Annotated[Optional[Path], typer.Option(
        "--output-dir", "-o", help="Where to put the files (default: checkpoints/UUID)."
    )] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the local path.")
                     ] = False,
) -> None:
    """Copy a model version's checkpoint into a local directory (as `checkpoint download`)."""
    from hpcdet.cli.checkpoint import download_checkpoint
    from hpcdet.views.models import downloadable
    from hpcdet.views.models import version as find_version

    store = read_store(paths())
    download_checkpoint(downloadable(store, find_version(store, name, version)), output_dir,
                        quiet)
