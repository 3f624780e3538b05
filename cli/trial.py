"""`hpcdet trial ...`."""

from __future__ import annotations

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
from hpcdet.client import connect
from hpcdet.views.trials import trial_metrics

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
    reported = trial_metrics(read_store(paths()), trial_id, group or None)
    if as_json:
        print_json([{"group": m.group, "steps_completed": m.steps_completed,
                     "metrics": m.metrics, "run_id": m.run_id, "reported": m.reported}
                    for m in reported.rows])
        return
    cols = ["Group", "Steps Completed", "Run", "Reported", *reported.keys]
    data = [[m.group, m.steps_completed, m.run_id, when(m.reported),
             *[m.metrics.get(k, "") for k in reported.keys]] for m in reported.rows]
    print_csv(cols, data) if csv else table(cols, data)


@app.command("continue")
def continue_(
    trial_id: TrialId,
    follow: Annotated[bool, typer.Option("--follow", "-f")] = False,
) -> None:
    """A new experiment whose one trial warm-starts from this trial's latest checkpoint."""
    p = paths()
    created = connect(p).continue_trial(trial_id)
    console.print(f"Created experiment {created.experiment_id}")
    if follow:
        raise typer.Exit(follow_trial(p, created.trial_ids[0]))
