"""`hpcdet experiment ...` (alias `hpcdet e ...`)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
import yaml

from hpcdet.cli.common import (
    ExperimentId,
    console,
    paths,
    print_csv,
    print_json,
    read_store,
    table,
    when,
)
from hpcdet.cli.follow import follow_trial
from hpcdet.config import load_experiment_config
from hpcdet.daemon import process
from hpcdet.daemon.requests import abandon, new_request_id, taken, withdraw
from hpcdet.errors import DaemonError, DiskFullError, HpcdetError, disk_full_cause
from hpcdet.paths import StatePaths
from hpcdet.snapshot import snapshot
from hpcdet.states import TrialState
from hpcdet.store.models import Trial

app = typer.Typer(no_args_is_help=True)


@app.command()
def create(
    config_file: Annotated[Path, typer.Argument(help="Experiment config (Determined's YAML).")],
    context: Annotated[Path, typer.Argument(help="Context directory, copied at submit.")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Stream the first trial's logs.")]
    = False,
    config: Annotated[Optional[list[str]], typer.Option(
        "--config", help="Override a config field: key=value (dotted keys).")] = None,
) -> None:
    """Create an experiment from CONFIG_FILE with CONTEXT as its code."""
    cfg = load_experiment_config(config_file, config or [])
    p = paths()
    rid = new_request_id()
    staging = p.requests / f"{rid}.context"
    try:
        files, size = snapshot(context, staging, warn=_warn)
        console.print(f"Preparing files to send to the daemon... {size / 1e3:.1f}KB and "
                      f"{files} files")
        result = process.call(
            p, "create", {"config": cfg.raw, "staging": str(staging), "request_id": rid},
            request_id=rid)
    except BaseException as e:
        outcome = _give_up(p, rid, staging, e)
        if outcome is e:
            raise
        if isinstance(outcome, BaseException):
            raise outcome from e
        result = outcome  # answered as the CLI gave up
    console.print(f"Created experiment {result['experiment_id']}")
    if result.get("warning"):
        console.print(f"Warning: {result['warning']}")
    if follow:
        code = follow_trial(p, result["trial_ids"][0])
        raise typer.Exit(code)


def _give_up(
    p: StatePaths, rid: str, staging: Path, e: BaseException
) -> BaseException | dict[str, Any]:
    """What a create that ended without an answer raises, or the daemon's result when it came
    meanwhile. The snapshot is removed only when the daemon never acts on the request: once
    taken, it is the daemon's to move into the experiment or remove."""
    withdrawn = withdraw(p, rid)
    if not withdrawn and taken(p, rid):
        reply = abandon(p, rid)
        if reply is not None:
            return reply["result"] if reply["ok"] else HpcdetError(reply["error"])
        if not isinstance(e, DaemonError):
            return e
        return DaemonError(
            "the hpcdet daemon took the request but has not answered yet; it keeps the "
            "context and creates the experiment, or logs why not in daemon.log. See "
            "`hpcdet experiment list` in a while, and `hpcdet daemon status`.")
    shutil.rmtree(staging, ignore_errors=True)
    if withdrawn and isinstance(e, DaemonError):
        return DaemonError("the hpcdet daemon did not take the request in time; it was "
                           "withdrawn and no experiment was created. See `hpcdet daemon "
                           "status`.")
    if isinstance(e, OSError) and disk_full_cause(e) is not None:
        return DiskFullError(f"the request and context snapshot in {p.requests}", e,
                             "experiment not created: ")
    return e


def _warn(message: str) -> None:
    print(f"Warning: {message}", file=sys.stderr)


@app.command("list")
def list_(
    csv: Annotated[bool, typer.Option("--csv")] = False,
) -> None:
    """List experiments."""
    store = read_store(paths())
    trials = store.trials()
    rows = []
    for exp in store.experiments():
        mine = [t for t in trials if t.experiment_id == exp.id]
        progress = exp.progress or sum(
            1.0 if t.state == TrialState.COMPLETED else t.progress for t in mine
        ) / max(1, len(mine))
        rows.append([exp.id, _owner(), exp.name, "", exp.state, f"{progress:.1%}",
                     when(exp.created), when(exp.ended), exp.resource_pool or "default"])
    cols = ["ID", "Owner", "Name", "Parent ID", "State", "Progress", "Started", "Ended",
            "Resource Pool"]
    print_csv(cols, rows) if csv else table(cols, rows)


def _owner() -> str:
    import getpass

    return getpass.getuser()


@app.command()
def describe(
    experiment_id: ExperimentId,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show an experiment, its trials and their jobs."""
    store = read_store(paths())
    exp = store.experiment(experiment_id)
    trials = store.trials(experiment_id)
    runs = store.runs([t.id for t in trials])
    config = json.loads(exp.config_json)
    if as_json:
        print_json({
            "experiment": exp.model_dump(exclude={"config_json"}), "config": config,
            "trials": [t.model_dump() for t in trials], "runs": [r.model_dump() for r in runs],
            "arrays": [a.model_dump() for a in store.arrays(experiment_id)],
        })
        return
    searcher = config.get("searcher", {})
    console.print(f"Experiment {exp.id}: {exp.name}   state {exp.state}   backend {exp.backend}"
                  f"   progress {exp.progress:.1%}")
    if exp.error:
        console.print(f"error: {exp.error}")
    console.print(f"searcher {searcher.get('name')}  metric {searcher.get('metric')}  "
                  f"smaller_is_better {searcher.get('smaller_is_better', True)}")
    smaller = searcher.get("smaller_is_better", True)
    scored = [t for t in trials if t.best_validation is not None]
    if scored:
        best = (min if smaller else max)(scored, key=lambda t: t.best_validation or 0.0)
        console.print(f"best trial: {best.id} ({searcher.get('metric')} = "
                      f"{best.best_validation})")
    table(
        ["Trial ID", "Request", "State", "Hyperparameters", "Restarts", "Searcher",
         "Ckpt Steps", "Best Validation", "Latest Checkpoint", "Reason"],
        [[t.id, t.request_id, t.state, t.hparams_json, t.restarts, _searcher_view(t),
          t.steps_completed, t.best_validation, t.latest_checkpoint, t.end_reason]
         for t in trials],
        title="Trials",
    )
    table(
        ["Trial ID", "Run", "Job ID", "State", "Reason", "Exit Code", "Submitted", "Ended",
         "Outcome"],
        [[r.trial_id, r.run_id, r.job_id, r.state, r.reason, r.exit_code, when(r.submitted),
          when(r.ended), r.outcome] for r in runs],
        title="Jobs",
    )


def _searcher_view(t: Trial) -> str:
    """What the searcher decided for the trial: operations (promotions), close, stop."""
    ops = json.loads(t.ops_json)
    words = []
    if ops:
        words.append("ops " + ",".join(str(o) for o in ops) + f" ({t.ops_completed} done)")
    if t.closed:
        words.append("closed")
    if t.stop_requested:
        words.append("stopped early")
    return "; ".join(words)


def _simple(op: str, experiment_id: int) -> None:
    console.print(process.call(paths(), op, {"exp_id": experiment_id}))


@app.command()
def pause(experiment_id: ExperimentId) -> None:
    """Checkpoint and stop the experiment's trials; `activate` resumes them."""
    _simple("pause", experiment_id)


@app.command()
def activate(experiment_id: ExperimentId) -> None:
    """Resume a paused experiment from its latest checkpoints."""
    _simple("activate", experiment_id)


@app.command()
def kill(experiment_id: ExperimentId) -> None:
    """Stop the experiment's trials at once."""
    _simple("kill", experiment_id)


@app.command()
def cancel(experiment_id: ExperimentId) -> None:
    """Stop the experiment gracefully: running trials checkpoint first."""
    _simple("cancel", experiment_id)


@app.command("continue")
def continue_(
    experiment_id: ExperimentId,
    config: Annotated[Optional[list[str]], typer.Option(
        "--config", help="Override a config field (single searcher only): key=value.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f")] = False,
) -> None:
    """Resume a finished experiment's trials from their latest checkpoints."""
    p = paths()
    args: dict[str, object] = {"exp_id": experiment_id}
    if config:
        store = read_store(p)
        stored = json.loads(store.experiment(experiment_id).config_json)
        args["config"] = load_experiment_config(yaml.safe_dump(stored), config).raw
    console.print(process.call(p, "continue", args))
    if follow:
        trial = read_store(p).trials(experiment_id)[0]
        raise typer.Exit(follow_trial(p, trial.id))
