"""`hpcdet checkpoint ...`."""

from __future__ import annotations

import json

import typer

from hpcdet.cli.common import paths, read_store, table, when
from hpcdet.config import ExperimentConfig
from hpcdet.daemon.submit import checkpoint_dir

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_(experiment_id: int) -> None:
    """Checkpoints of an experiment."""
    store = read_store(paths())
    exp = store.experiment(experiment_id)
    base = checkpoint_dir(ExperimentConfig.from_dict(json.loads(exp.config_json)), paths())
    rows = []
    for c in store.checkpoints(exp_id=experiment_id):
        resources = json.loads(c.resources_json)
        size = sum(int(v) for v in resources.values())
        rows.append([c.trial_id, c.steps_completed, c.uuid, when(c.reported), c.state,
                     f"{len(resources)} files, {size} B", base / c.uuid])
    table(["Trial ID", "Steps Completed", "UUID", "Report Time", "State", "Resources", "Path"],
          rows)
