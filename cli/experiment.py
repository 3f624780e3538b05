"""`hpcdet experiment ...` (alias `hpcdet e ...`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Annotated

import typer

from hpcdet.cli.common import console, paths, print_csv, print_json, read_store, table, when
from hpcdet.cli.follow import follow_trial
from hpcdet.config import load_experiment_config
from hpcdet.context import snapshot
from hpcdet.daemon import process
from hpcdet.daemon.requests import new_request_id

app = typer.Typer(no_args_is_help=True)


@app.command()
def create(
    config_file: Annotated[Path, typer.Argument(help="Experiment config (Determined's YAML).")],
    context: Annotated[Path, typer.Argument(help="Context directory, copied at submit.")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Stream the first trial's logs.")]
    = False,
    config: Annotated[list[str] | None, typer.Option(
        "--config", help="Override a config field: key=value (dotted keys).")] = None,
) -> None:
    """Create an experiment from CONFIG_FILE with CONTEXT as its code."""
    cfg = load_experiment_config(config_file, config or [])
    p = paths()
    rid = new_request_id()
    staging = p.requests / f"{rid}.context"
    try:
        files, size = snapshot(context, staging)
        console.print(f"Preparing files to send to the daemon... {size / 1e3:.1f}KB and "
                      f"{files} files")
        result = process.call(p, "create", {"config": cfg.raw, "staging": str(staging)})
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    console.print(f"Created experiment {result['experiment_id']}")
    if result.get("warning"):
        console.print(f"Warning: {result['warning']}")
    if follow:
        code = follow_trial(p, result["trial_ids"][0])
        raise typer.Exit(code)


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
        progress = sum(1.0 if t.state == "COMPLETED" else t.progress for t in mine) / max(
            1, len(mine))
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
    experiment_id: int,
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
        })
        return
    searcher = config.get("searcher", {})
    console.print(f"Experiment {exp.id}: {exp.name}   state {exp.state}   backend {exp.backend}")
    console.print(f"searcher {searcher.get('name')}  metric {searcher.get('metric')}  "
                  f"smaller_is_better {searcher.get('smaller_is_better', True)}")
    table(
        ["Trial ID", "State", "Hyperparameters", "Restarts", "Steps", "Best Validation",
         "Latest Checkpoint", "Reason"],
        [[t.id, t.state, t.hparams_json, t.restarts, t.steps_completed, t.best_validation,
          t.latest_checkpoint, t.end_reason] for t in trials],
        title="Trials",
    )
    table(
        ["Trial ID", "Run", "Job ID", "State", "Reason", "Exit Code", "Submitted", "Ended",
         "Outcome"],
        [[r.trial_id, r.run_id, r.job_id, r.state, r.reason, r.exit_code, when(r.submitted),
          when(r.ended), r.outcome] for r in runs],
        title="Jobs",
    )


def _simple(op: str, experiment_id: int) -> None:
    console.print(process.call(paths(), op, {"exp_id": experiment_id}))


@app.command()
def pause(experiment_id: int) -> None:
    """Checkpoint and stop the experiment's trials; `activate` resumes them."""
    _simple("pause", experiment_id)


@app.command()
def activate(experiment_id: int) -> None:
    """Resume a paused experiment from its latest checkpoints."""
    _simple("activate", experiment_id)


@app.command()
def kill(experiment_id: int) -> None:
    """Stop the experiment's trials at once."""
    _simple("kill", experiment_id)
