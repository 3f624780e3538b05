"""`hpcdet experiment label ...` and `hpcdet experiment set ...`: what describes an experiment
and the settings that may change while it runs."""

from typing import Annotated

import typer

from hpcdet.cli.common import ExperimentId, console, paths, read_store, table
from hpcdet.link import connect
from hpcdet.protocol.messages import JobUpdate, SetExperiment, UpdateJobs

label_app = typer.Typer(no_args_is_help=True, help="Add or remove an experiment's labels.")


@label_app.command("add")
def label_add(experiment_id: ExperimentId, label: str) -> None:
    """Add a label."""
    console.print(connect(paths()).send(SetExperiment(experiment_id, "labels_add", label)))


@label_app.command("remove")
def label_remove(experiment_id: ExperimentId, label: str) -> None:
    """Remove a label."""
    console.print(connect(paths()).send(SetExperiment(experiment_id, "labels_remove", label)))


set_app = typer.Typer(no_args_is_help=True, help="Change one setting of an experiment.")


@set_app.command("name")
def set_name(experiment_id: ExperimentId, name: str) -> None:
    """Rename the experiment."""
    console.print(connect(paths()).send(SetExperiment(experiment_id, "name", name)))


@set_app.command("description")
def set_description(experiment_id: ExperimentId, description: str) -> None:
    """Set the experiment's description."""
    console.print(connect(paths()).send(SetExperiment(experiment_id, "description", description)))


@set_app.command("max-slots")
def set_max_slots(
    experiment_id: ExperimentId,
    max_slots: Annotated[str, typer.Argument(help="A number of slots, or none.")],
) -> None:
    """Cap the slots its trials hold at once (none: no cap), from now on."""
    value = None if max_slots.lower() in ("none", "null") else _count(max_slots)
    console.print(connect(paths()).send(SetExperiment(experiment_id, "max_slots", value)))


def _count(text: str) -> int:
    if not text.isdigit():
        raise typer.BadParameter(f"must be a whole number or none, not {text!r}")
    return int(text)


@set_app.command("gc-policy")
def set_gc_policy(
    experiment_id: ExperimentId,
    save_experiment_best: Annotated[int, typer.Option("--save-experiment-best", min=0)],
    save_trial_best: Annotated[int, typer.Option("--save-trial-best", min=0)],
    save_trial_latest: Annotated[int, typer.Option("--save-trial-latest", min=0)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask first.")] = False,
) -> None:
    """Change which checkpoints it keeps, and delete the others now."""
    from hpcdet.checkpoint_gc import RetentionPolicy
    from hpcdet.views.checkpoints import doomed_checkpoints

    policy = RetentionPolicy(save_experiment_best, save_trial_best, save_trial_latest)
    if not yes:
        store = read_store(paths())
        doomed = doomed_checkpoints(store, experiment_id, policy)
        table(["Trial ID", "Steps Completed", "UUID"],
              [[c.trial_id, c.steps_completed, c.uuid] for c in doomed],
              title="The checkpoints this policy deletes now", fold=True)
        typer.confirm("Changing the checkpoint garbage collection policy of an experiment may "
                      "delete checkpoints for good. Do you wish to proceed?", abort=True)
    console.print(connect(paths()).send(SetExperiment(experiment_id, "gc_policy", {
        "save_experiment_best": save_experiment_best, "save_trial_best": save_trial_best,
        "save_trial_latest": save_trial_latest})))


@set_app.command("priority")
def set_priority(experiment_id: ExperimentId, priority: int) -> None:
    """Its place in the job queue, as `hpcdet job update --priority` sets it."""
    console.print(connect(paths()).send(
        UpdateJobs.of([JobUpdate(experiment_id, "priority", priority)])))


@set_app.command("weight")
def set_weight(experiment_id: ExperimentId, weight: float) -> None:
    """Its fair-share weight, as `hpcdet job update --weight` sets it."""
    console.print(connect(paths()).send(
        UpdateJobs.of([JobUpdate(experiment_id, "weight", weight)])))
