"""What experiments use, as `experiment describe` shows it (slot-hours, idle GPUs), and the
estimate `experiment create` prints and asks about before it sends a search."""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import typer

from hpcdet.cli.common import console, paths
from hpcdet.errors import UsageError

if TYPE_CHECKING:
    from hpcdet.config import ExperimentConfig
    from hpcdet.records import RunRecord
    from hpcdet.views.experiments import ExperimentView

YES_HELP = "Create it without asking, whatever its estimated slot-hours."


def describe_json(view: ExperimentView) -> dict[str, Any]:
    """`describe --json`'s slot-hours (its own and each trial's) and idle GPUs."""
    from hpcdet.views.usage import idle_gpus

    exp_id = view.experiment.id
    return {
        "usage": {**view.used.to_dict(), "trials": {
            str(t.trial.id): view.trial_used(t.trial.id).to_dict() for t in view.trials}},
        # GPUs the harnesses saw idle past their threshold (HPCDET_GPU_IDLE_SECONDS)
        "idle_gpus": [g.to_dict() for g in idle_gpus(paths(), exp_id, view.runs)],
    }


def print_usage(view: ExperimentView) -> None:
    from hpcdet.views.usage import idle_gpus

    console.print(f"used: {view.used.line()}", markup=False)
    if view.experiment.advice:
        console.print(f"advice: {view.experiment.advice}", markup=False)
    now = time.time()
    for gpu in idle_gpus(paths(), view.experiment.id, view.runs):
        console.print(f"warning: {gpu.line(now)}", markup=False)


def used_header(view: ExperimentView) -> str:
    return f"{view.used.unit.replace('-hours', '-h')} (from)"


def used_cell(view: ExperimentView, run: RunRecord) -> str:
    used = view.run_used(run)
    return "" if used is None else f"{used.hours:.3f} ({used.source})"


def confirm(config: ExperimentConfig, yes: bool) -> None:
    """Print what the search will use; above the user's ``ask_above_slot_hours``, ask
    ``Go on? [y/N]`` (refused without a terminal to ask on, unless ``--yes``)."""
    from hpcdet.config.cluster import load_cluster_config
    from hpcdet.views.access import reads_here
    from hpcdet.views.estimate import estimate

    reads = reads_here(paths())
    with reads if reads is not None else nullcontext():
        found = estimate(config, reads)
    for line in found.lines():
        console.print(line, markup=False)
    limit = load_cluster_config().ask_above_slot_hours
    hours = found.hours
    if yes or limit is None or hours is None or hours <= limit:
        return
    above = (f"its estimate, {hours:.1f} {found.unit}, is above ask_above_slot_hours "
             f"({limit:g}) of your cluster config")
    if not sys.stdin.isatty():
        raise UsageError(f"not created: {above}, and there is no terminal to ask on; give "
                         "--yes to create it anyway")
    if not typer.confirm(f"{above[0].upper()}{above[1:]}. Go on?", default=False):
        console.print("Not created.")
        raise typer.Exit(1)
