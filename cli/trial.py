"""`hpcdet trial ...`."""

from __future__ import annotations

import json
from typing import Annotated, Any, Optional

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
from hpcdet.cli.follow import follow_trial, print_records
from hpcdet.client import connect
from hpcdet.errors import UsageError
from hpcdet.views.logs import LEVELS, LogFilter, trial_log
from hpcdet.views.trials import TrialMetrics, describe_trial, trial_metrics

app = typer.Typer(no_args_is_help=True)


@app.command()
def logs(
    trial_id: TrialId,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming.")] = False,
    head: Annotated[Optional[int], typer.Option(
        "--head", min=0, help="Only the first N lines.")] = None,
    tail: Annotated[Optional[int], typer.Option(
        "--tail", "-t", min=0, help="Only the last N lines (with -f: then the new ones).")] = None,
    rank_ids: Annotated[Optional[list[int]], typer.Option(
        "--rank-id", "--rank", help="Only lines of this rank (repeat for several).")] = None,
    level: Annotated[Optional[str], typer.Option(
        "--level", "-l", help=f"Only lines of this level or higher: {', '.join(LEVELS)}.")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Print a trial's logs (all runs, all nodes, in time order)."""
    if head is not None and (tail is not None or follow):
        raise UsageError("--head cannot be combined with --tail or --follow")
    if level is not None and level.upper() not in LEVELS:
        raise UsageError(f"--level must be one of {', '.join(LEVELS)}, not {level!r}")
    which = LogFilter(frozenset(rank_ids or ()), level.upper() if level else None, head, tail)
    p = paths()
    trial = read_store(p).trial(trial_id)
    if follow:
        raise typer.Exit(follow_trial(p, trial_id, which=which, as_json=as_json,
                                      announce=False))
    print_records(trial_log(p, trial.experiment_id, trial_id, which), as_json)


@app.command()
def describe(
    trial_id: TrialId,
    show_metrics: Annotated[bool, typer.Option("--metrics", help="Also every metric it reported.")]
    = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show a trial: state, hyperparameters, status, metadata, alerts and runs."""
    store = read_store(paths())
    view = describe_trial(store, trial_id)
    reported = trial_metrics(store, trial_id) if show_metrics else None
    if as_json:
        out = view.to_dict()
        if reported is not None:
            out["metrics"] = _metric_dicts(reported)
        print_json(out)
        return
    t = view.trial
    table(["Trial ID", "Experiment ID", "State", "Status", "Hyperparameters", "Restarts",
           "Steps Completed", "Best Validation", "Latest Checkpoint", "Reason"],
          [[t.id, t.experiment_id, t.state, t.status, t.hparams_json, t.restarts,
            t.steps_completed, t.best_validation, t.latest_checkpoint, t.end_reason]])
    if view.metadata:
        console.print(f"metadata: {json.dumps(view.metadata, sort_keys=True)}")
    if view.alerts:
        table(["Level", "Title", "Description", "Time"],
              [[a["level"], a["title"], a["description"], when(a.get("time"))]
               for a in view.alerts], title="Alerts")
    table(["Run", "Job ID", "State", "Reason", "Exit Code", "Submitted", "Ended", "Outcome"],
          [[r.run_id, r.job_id, r.state, r.reason, r.exit_code, when(r.submitted),
            when(r.ended), r.outcome] for r in view.runs], title="Jobs")
    if reported is not None:
        _metric_table(reported, csv=False)


def _metric_dicts(reported: TrialMetrics) -> list[dict[str, Any]]:
    return [{"group": m.group, "steps_completed": m.steps_completed, "metrics": m.metrics,
             "batch_metrics": m.batch_metrics, "run_id": m.run_id, "reported": m.reported}
            for m in reported.rows]


def _metric_table(reported: TrialMetrics, csv: bool) -> None:
    cols = ["Group", "Steps Completed", "Run", "Reported", *reported.keys]
    data = [[m.group, m.steps_completed, m.run_id, when(m.reported),
             *[m.metrics.get(k, "") for k in reported.keys]] for m in reported.rows]
    print_csv(cols, data) if csv else table(cols, data)


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
        print_json(_metric_dicts(reported))
        return
    _metric_table(reported, csv)


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


@app.command()
def kill(trial_id: TrialId) -> None:
    """End the trial as CANCELED now; the rest of its experiment goes on."""
    console.print(connect(paths()).kill_trial(trial_id))
