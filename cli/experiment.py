"""`hpcdet experiment ...` (alias `hpcdet e ...`)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
import yaml

from hpcdet import images
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
from hpcdet.client import connect
from hpcdet.config import load_experiment_config
from hpcdet.containers import ContainerSpec
from hpcdet.errors import ImageError
from hpcdet.views.experiments import describe_experiment, experiment_rows

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

    def announce(files: int, size: int) -> None:
        console.print(f"Preparing files to send to the daemon... {size / 1e3:.1f}KB and "
                      f"{files} files")

    created = connect(p).create(cfg.raw, context, on_snapshot=announce, warn=_warn)
    console.print(f"Created experiment {created.experiment_id}")
    for line in created.warning.splitlines():
        console.print(f"Warning: {line}")
    if created.image:
        _convert(ContainerSpec.from_dict(created.image))
    if follow:
        code = follow_trial(p, created.trial_ids[0])
        raise typer.Exit(code)


def _convert(spec: ContainerSpec) -> None:
    """Convert the trials' image here, on the login node, where the registry is reachable and
    the progress shows; jobs that start meanwhile wait for it."""
    if spec.image.pull_from is None or (Path(spec.image.file).exists() and not spec.force_pull):
        return
    if shutil.which(spec.runtime) is None:  # the jobs may have it at the path the daemon found
        console.print(f"{spec.runtime} is not on PATH here: the first job converts "
                      f"{spec.image.pull_from} (its progress is in `hpcdet trial logs`)")
        return
    try:
        images.ensure(spec, lambda line: console.print(line, markup=False, highlight=False),
                      force=spec.force_pull)
    except ImageError as e:
        raise ImageError(f"{e}\nThe experiment's trials end with this error unless the image "
                         "is there when they start.") from e


def _warn(message: str) -> None:
    print(f"Warning: {message}", file=sys.stderr)


@app.command("list")
def list_(
    csv: Annotated[bool, typer.Option("--csv")] = False,
) -> None:
    """List experiments."""
    rows = [[r.experiment.id, _owner(), r.experiment.name, "", r.experiment.state,
             f"{r.progress:.1%}", when(r.experiment.created), when(r.experiment.ended),
             r.experiment.resource_pool or "default"] for r in experiment_rows(read_store(paths()))]
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
    view = describe_experiment(read_store(paths()), experiment_id)
    exp = view.experiment
    if as_json:
        print_json({
            "experiment": exp.model_dump(exclude={"config_json"}), "config": view.config,
            "trials": [t.trial.model_dump() for t in view.trials],
            "runs": [r.model_dump() for r in view.runs],
            "arrays": [a.model_dump() for a in view.arrays],
        })
        return
    searcher = view.searcher
    console.print(f"Experiment {exp.id}: {exp.name}   state {exp.state}   backend {exp.backend}"
                  f"   progress {exp.progress:.1%}")
    if exp.error:
        console.print(f"error: {exp.error}")
    console.print(f"searcher {searcher.get('name')}  metric {searcher.get('metric')}  "
                  f"smaller_is_better {searcher.get('smaller_is_better', True)}")
    if view.best is not None:
        console.print(f"best trial: {view.best.trial_id} ({view.best.metric} = "
                      f"{view.best.value})")
    table(
        ["Trial ID", "Request", "State", "Status", "Hyperparameters", "Restarts", "Searcher",
         "Ckpt Steps", "Best Validation", "Latest Checkpoint", "Reason"],
        [[t.id, t.request_id, t.state, t.status, t.hparams_json, t.restarts, row.searcher,
          t.steps_completed, t.best_validation, t.latest_checkpoint, t.end_reason]
         for row in view.trials for t in [row.trial]],
        title="Trials",
    )
    table(
        ["Trial ID", "Run", "Job ID", "State", "Reason", "Exit Code", "Submitted", "Ended",
         "Outcome"],
        [[r.trial_id, r.run_id, r.job_id, r.state, r.reason, r.exit_code, when(r.submitted),
          when(r.ended), r.outcome] for r in view.runs],
        title="Jobs",
    )


@app.command()
def pause(experiment_id: ExperimentId) -> None:
    """Checkpoint and stop the experiment's trials; `activate` resumes them."""
    console.print(connect(paths()).pause(experiment_id))


@app.command()
def activate(experiment_id: ExperimentId) -> None:
    """Resume a paused experiment from its latest checkpoints."""
    console.print(connect(paths()).activate(experiment_id))


@app.command()
def kill(experiment_id: ExperimentId) -> None:
    """Stop the experiment's trials at once."""
    console.print(connect(paths()).kill(experiment_id))


@app.command()
def cancel(experiment_id: ExperimentId) -> None:
    """Stop the experiment gracefully: running trials checkpoint first."""
    console.print(connect(paths()).cancel(experiment_id))


@app.command("continue")
def continue_(
    experiment_id: ExperimentId,
    config: Annotated[Optional[list[str]], typer.Option(
        "--config", help="Override a config field (single searcher only): key=value.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f")] = False,
) -> None:
    """Resume a finished experiment's trials from their latest checkpoints."""
    p = paths()
    overrides = None
    if config:
        stored = json.loads(read_store(p).experiment(experiment_id).config_json)
        overrides = load_experiment_config(yaml.safe_dump(stored), config).raw
    console.print(connect(p).continue_experiment(experiment_id, overrides))
    if follow:
        trial = read_store(p).trials(experiment_id)[0]
        raise typer.Exit(follow_trial(p, trial.id))
