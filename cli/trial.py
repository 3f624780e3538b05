"""`hpcdet trial ...`."""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from hpcdet.cli.checkpoint import download_checkpoint
from hpcdet.cli.common import (
    TrialId,
    console,
    paths,
    print_csv,
    print_json,
    read_store,
    table,
    truth,
    when,
)
from hpcdet.cli.follow import (
    After,
    Before,
    Follow,
    Head,
    JsonLines,
    Level,
    RankIds,
    Tail,
    follow_trial,
    show_logs,
)
from hpcdet.cli.task import trial_shell
from hpcdet.errors import NotFoundError, UsageError
from hpcdet.link import connect
from hpcdet.protocol.messages import ContinueTrial, KillTrial
from hpcdet.views import lookups
from hpcdet.views.trials import describe_trial, trial_metrics

if TYPE_CHECKING:
    from hpcdet.views.trials import TrialMetrics

app = typer.Typer(no_args_is_help=True)
app.command("shell")(trial_shell)


@app.command()
def logs(
    trial_id: TrialId, follow: Follow = False, head: Head = None, tail: Tail = None,
    rank_ids: RankIds = None, level: Level = None, as_json: JsonLines = False,
    after: After = None, before: Before = None,
) -> None:
    """Print a trial's logs (all runs, all nodes, in time order)."""
    raise typer.Exit(show_logs(trial_id, follow, head, tail, rank_ids, level, as_json,
                              after, before))


@app.command()
def describe(
    trial_id: TrialId,
    show_metrics: Annotated[bool, typer.Option("--metrics", help="Also every metric it reported.")]
    = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    csv: Annotated[bool, typer.Option(
        "--csv", help="The trial's row, then (with --metrics) its reports, as CSV.")] = False,
) -> None:
    """Show a trial: state, hyperparameters, status, metadata, alerts and runs."""
    if as_json and csv:
        raise UsageError("give one of --json and --csv")
    store = read_store(paths())
    view = describe_trial(store, trial_id)
    reported = trial_metrics(store, trial_id) if show_metrics else None
    t = view.trial
    cols = ["Trial ID", "Experiment ID", "State", "Status", "Hyperparameters", "Restarts",
            "Steps Completed", "Best Validation", "Latest Checkpoint", "Reason"]
    row = [t.id, t.experiment_id, t.state, t.status, json.dumps(t.hparams), t.restarts,
           t.steps_completed, t.best_validation, t.latest_checkpoint, t.end_reason]
    if csv:
        print_csv(cols, [row])
        if reported is not None:
            print()
            _metric_table(reported, csv=True)
        return
    if as_json:
        out = view.to_dict()
        if reported is not None:
            out["metrics"] = _metric_dicts(reported)
        print_json(out)
        return
    table(cols, [row])
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


def _metric_dicts(reported: "TrialMetrics") -> list[dict[str, Any]]:
    return [{"group": m.group, "steps_completed": m.steps_completed, "metrics": m.metrics,
             "batch_metrics": m.batch_metrics, "run_id": m.run_id, "reported": m.reported}
            for m in reported.rows]


def _metric_table(reported: "TrialMetrics", csv: bool) -> None:
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
    created = connect(p).send(ContinueTrial(trial_id))
    console.print(f"Created experiment {created.experiment_id}")
    if follow:
        raise typer.Exit(follow_trial(p, created.trial_ids[0]))


@app.command()
def kill(trial_id: TrialId) -> None:
    """End the trial as CANCELED now; the rest of its experiment goes on."""
    console.print(connect(paths()).send(KillTrial(trial_id)))


@app.command()
def download(
    trial_id: TrialId,
    best: Annotated[bool, typer.Option("--best", help="Its best checkpoint.")] = False,
    latest: Annotated[bool, typer.Option("--latest", help="Its latest checkpoint.")] = False,
    uuid: Annotated[Optional[str], typer.Option("--uuid", help="This checkpoint of it.")] = None,
    output_dir: Annotated[Optional[Path], typer.Option(
        "--output-dir", "-o", help="Where to put the files (default: checkpoints/UUID).")]
    = None,
    sort_by: Annotated[Optional[str], typer.Option(
        "--sort-by", help="With --best: a validation metric to rank by.")] = None,
    smaller_is_better: Annotated[Optional[str], typer.Option(
        "--smaller-is-better", help="With --sort-by: true or false.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the path.")] = False,
) -> None:
    """Copy one of the trial's checkpoints here: --best, --latest or --uuid."""
    if [best, latest, uuid is not None].count(True) != 1:
        raise UsageError("give exactly one of --best, --latest and --uuid")
    if (sort_by is not None or smaller_is_better is not None) and not best:
        raise UsageError("--sort-by and --smaller-is-better flags can only be used with --best")
    if (sort_by is None) != (smaller_is_better is None):
        raise UsageError("--sort-by and --smaller-is-better must be set together")
    store = read_store(paths())
    trial = lookups.trial(store, trial_id)
    chosen = uuid or trial.latest_checkpoint
    if best:
        from hpcdet.views.checkpoints import ranked_checkpoints

        smaller = truth("--smaller-is-better", smaller_is_better)
        ranked = ranked_checkpoints(store, paths(), trial.experiment_id, 1, trial_id=trial_id,
                                    sort_by=sort_by, smaller_is_better=smaller)
        chosen = ranked.checkpoints[0].checkpoint.uuid if ranked.checkpoints else None
    if chosen is None:
        raise NotFoundError(f"trial {trial_id} has no checkpoint to download"
                            + (" with a validation metric to rank it by" if best else ""))
    if lookups.checkpoint(store, chosen).trial_id != trial_id:
        raise NotFoundError(f"checkpoint {chosen} is not one of trial {trial_id}'s")
    download_checkpoint(chosen, output_dir, quiet)
