"""`hpcdet trial ...`."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from hpcdet.cli.common import (
    TrialId,
    console,
    paths,
    print_csv,
    print_json,
    read_store,
    table,
    when,
)
from hpcdet.cli.follow import follow_trial, print_logs
from hpcdet.daemon import process

app = typer.Typer(no_args_is_help=True)


@app.command()
def logs(
    trial_id: TrialId,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming.")] = False,
) -> None:
    """Print a trial's logs (all runs, all nodes)."""
    p = paths()
    store = read_store(p)
    trial = store.trial(trial_id)
    if follow:
        raise typer.Exit(follow_trial(p, trial_id))
    print_logs(p, trial.experiment_id, trial_id, {})


@app.command()
def metrics(
    trial_id: TrialId,
    group: Annotated[str, typer.Option(help="training, validation, or another group")] = "",
    csv: Annotated[bool, typer.Option("--csv")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The metrics a trial reported."""
    store = read_store(paths())
    store.trial(trial_id)
    rows = store.metrics(trial_id, group or None)
    if as_json:
        print_json([{"group": m.group, "steps_completed": m.steps_completed,
                     "metrics": json.loads(m.metrics_json), "run_id": m.run_id,
                     "reported": m.reported} for m in rows])
        return
    keys: list[str] = []
    for m in rows:
        for k in json.loads(m.metrics_json):
            if k not in keys:
                keys.append(k)
    cols = ["Group", "Steps Completed", "Run", "Reported", *keys]
    data = []
    for m in rows:
        values = json.loads(m.metrics_json)
        data.append([m.group, m.steps_completed, m.run_id, when(m.reported),
                     *[values.get(k, "") for k in keys]])
    print_csv(cols, data) if csv else table(cols, data)


@app.command("continue")
def continue_(
    trial_id: TrialId,
    follow: Annotated[bool, typer.Option("--follow", "-f")] = False,
) -> None:
    """A new experiment whose one trial warm-starts from this trial's latest checkpoint."""
    p = paths()
    result = process.call(p, "continue_trial", {"trial_id": trial_id})
    console.print(f"Created experiment {result['experiment_id']}")
    if follow:
        raise typer.Exit(follow_trial(p, result["trial_ids"][0]))
