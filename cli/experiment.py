"""`hpcdet experiment ...` (alias `hpcdet e ...`)."""

import json
import shutil
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, Union

import typer

from hpcdet.cli import checkpoint, experiment_set, usage
from hpcdet.cli.common import (
    ExperimentId,
    RequestId,
    console,
    open_reads,
    parse_id,
    paths,
    print_csv,
    print_json,
    read_store,
    table,
    truth,
    when,
    write_csv,
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
from hpcdet.errors import ImageError, NotFoundError, UsageError
from hpcdet.link import connect
from hpcdet.protocol.messages import (
    Activate,
    Cancel,
    Continue,
    DeleteExperiment,
    Kill,
    Pause,
    SetExperiment,
)
from hpcdet.states import FINAL_EXPERIMENT_STATES, ExperimentState
from hpcdet.views import lookups

if TYPE_CHECKING:
    from hpcdet.containers import ContainerSpec
    from hpcdet.link import Created
    from hpcdet.views.access import Queries, Reads

app = typer.Typer(no_args_is_help=True)
app.add_typer(experiment_set.label_app, name="label")
app.add_typer(experiment_set.set_app, name="set")


@app.command()
def create(
    config_file: Annotated[Path, typer.Argument(help="Experiment config (Determined's YAML).")],
    context: Annotated[Path, typer.Argument(help="Context directory, copied at submit.")],
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", "--follow-first-trial", help="Stream the first trial's logs.")]
    = False,
    config: Annotated[Optional[list[str]], typer.Option(
        "--config", help="Override a config field: key=value (dotted keys).")] = None,
    paused: Annotated[bool, typer.Option(
        "--paused", help="Create it paused: its trials wait for `experiment activate`.")]
    = False,
    includes: Annotated[Optional[list[Path]], typer.Option(
        "--include", "-i", help="A file or directory to add at the context's top (repeat).")]
    = None,
    test: Annotated[bool, typer.Option(
        "--test", "--test-mode", "-t", help="Run one trial of length 1 first, as a check, "
        "and say whether it worked; nothing else is created.")] = False,
    request_id: RequestId = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help=usage.YES_HELP)] = False,
) -> None:
    """Create an experiment from CONFIG_FILE with CONTEXT as its code."""
    from hpcdet.config import load_experiment_config, smoke_config

    if [follow, paused, test].count(True) > 1:
        raise UsageError("--follow, --paused and --test cannot be combined")
    cfg = load_experiment_config(config_file, config or [])
    raw = smoke_config(cfg.raw) if test else cfg.raw
    if test:
        console.print("Experiment configuration validation succeeded!")
    else:
        usage.confirm(cfg, yes)
    p = paths()
    created = _create(raw, context, paused, includes or [], cfg.environment.has_image,
                      "test " if test else "", request_id)
    if follow or test:
        code = follow_trial(p, created.trial_ids[0])
        if test:
            console.print("Model definition test succeeded!" if code == 0 else
                          "Model definition test failed: see the trial's logs above")
        raise typer.Exit(code)


def _create(raw: dict[str, Any], context: Path, paused: bool, includes: list[Path],
            image: bool, kind: str = "", request_id: Optional[str] = None) -> "Created":
    """The create `experiment create` and `submit` share: snapshot, create, say so (before the
    image, whose conversion may fail while the experiment exists), and convert the image."""

    def announce(files: int, size: int) -> None:
        console.print(f"Preparing files to send to the daemon... {size / 1e3:.1f}KB and "
                      f"{files} files")

    # Asked only with an image, so that a daemon older than the question takes the others.
    created = connect(paths()).create(raw, context, on_snapshot=announce, warn=_warn,
                                      paused=paused, includes=includes, convert_image=image,
                                      request_id=request_id)
    console.print(f"Created {kind}experiment {created.experiment_id}")
    for line in created.warning.splitlines():
        console.print(f"Warning: {line}")
    if created.image:
        from hpcdet.containers import ContainerSpec

        _convert(ContainerSpec.from_dict(created.image), created.image_reserved)
    return created


def submit(
    config_file: Annotated[Path, typer.Argument(help="Experiment config (Determined's YAML).")],
    context: Annotated[Optional[Path], typer.Argument(
        help="Context directory (default: the config file's directory).")] = None,
    config: Annotated[Optional[list[str]], typer.Option(
        "--config", help="Override a config field: key=value (dotted keys).")] = None,
    includes: Annotated[Optional[list[Path]], typer.Option(
        "--include", "-i", help="A file or directory to add at the context's top (repeat).")]
    = None,
    request_id: RequestId = None,
) -> None:
    """Create an experiment and return at once, saying how to follow it (log out if you
    like: the daemon and the batch system carry on)."""
    from hpcdet.config import load_experiment_config

    cfg = load_experiment_config(config_file, config or [])
    exp = _create(cfg.raw, context or config_file.parent, False, includes or [],
                  cfg.environment.has_image, request_id=request_id).experiment_id
    console.print(f"  follow its logs:  hpcdet experiment logs {exp} -f")
    console.print(f"  see its trials:   hpcdet experiment describe {exp}")
    console.print("  its jobs:         hpcdet job list")
    console.print(f"  wait for its end: hpcdet experiment wait {exp}")


def _convert(spec: "ContainerSpec", reserved: str) -> None:
    """Convert the trials' image here, on the login node, where the registry is reachable and
    the progress shows; jobs that start meanwhile wait for it (on the pull lock the daemon
    took for this CLI, ``reserved``, from before they were submitted)."""
    from hpcdet import images

    if not images.needs_pull(spec, spec.force_pull):
        images.release(spec, reserved)
        return
    if shutil.which(spec.runtime) is None:  # the jobs may have it at the path the daemon found
        images.release(spec, reserved)
        console.print(f"{spec.runtime} is not on PATH here: the first job converts "
                      f"{spec.image.pull_from} (its progress is in `hpcdet trial logs`)")
        return
    try:
        images.ensure(spec, lambda line: console.print(line, markup=False, highlight=False),
                      force=spec.force_pull, reserved=reserved)
    except ImageError as e:
        raise ImageError(f"{e}\nThe experiment's trials end with this error unless the image "
                         "is there when they start.") from e


def _warn(message: str) -> None:
    print(f"Warning: {message}", file=sys.stderr)


@app.command("list")
def list_(
    show_all: Annotated[bool, typer.Option("--all", "-a", help="Archived ones too.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many.")] = 1000,
    offset: Annotated[int, typer.Option("--offset", min=0, help="Skip this many first.")] = 0,
    labels: Annotated[Optional[list[str]], typer.Option(
        "--label", help="Only those with this label (repeat: with every one).")] = None,
    csv: Annotated[bool, typer.Option("--csv")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List experiments (not archived ones, unless --all)."""
    from hpcdet.views.experiments import experiment_rows

    with open_reads(paths()) as reads:
        listed = experiment_rows(reads, archived=show_all, labels=sorted(set(labels or ())),
                                 offset=offset, limit=limit)
    if as_json:
        print_json([r.to_dict() for r in listed])
        return
    owner = _owner()
    rows = [[r.experiment.id, owner, r.experiment.name, "", r.experiment.state,
             f"{r.progress:.1%}", when(r.experiment.created), when(r.experiment.ended),
             r.experiment.resource_pool or "default",
             *([r.experiment.archived] if show_all else [])] for r in listed]
    cols = ["ID", "Owner", "Name", "Parent ID", "State", "Progress", "Started", "Ended",
            "Resource Pool", *(["Archived"] if show_all else [])]
    print_csv(cols, rows) if csv else table(cols, rows)


app.command("ls", hidden=True)(list_)


def _owner() -> str:
    import getpass

    return getpass.getuser()


@app.command()
def describe(
    experiment_ids: Annotated[str, typer.Argument(help="An id, or several: 1,2,3.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
    csv: Annotated[bool, typer.Option(
        "--csv", help="Its experiments, trials and workloads as CSV.")] = False,
    outdir: Annotated[Optional[Path], typer.Option(
        "--outdir", help="Write experiments.csv, trials.csv and workloads.csv here.")] = None,
    metrics: Annotated[bool, typer.Option(
        "--metrics", help="Workloads with a column per metric.")] = False,
) -> None:
    """Show an experiment (or several), its trials and their jobs."""
    ids = [parse_id(i) for i in experiment_ids.split(",") if i.strip()]
    if not ids:
        raise typer.BadParameter("name at least one experiment id")
    if [as_json, csv, outdir is not None].count(True) > 1:
        raise UsageError("give at most one of --json, --csv and --outdir")
    # The workloads need every metric report: the ORM's store reads them.
    store = read_store(paths()) if csv or outdir is not None or metrics else None
    if store is not None:
        from hpcdet.views.experiments import describe_sheets

        sheets = describe_sheets(store, ids, metrics)
        if outdir is not None:
            outdir.mkdir(parents=True, exist_ok=True)
            for sheet in sheets:
                with open(outdir / f"{sheet.name}.csv", "w", newline="") as f:
                    write_csv(f, sheet.columns, sheet.rows)
            return
        if csv:
            for sheet in sheets:
                print(f"{sheet.name.capitalize()}:")
                print_csv(sheet.columns, sheet.rows)
            return
    # One way into the database per command: the store when the workloads need it.
    with closing(store if store is not None else open_reads(paths())) as source:
        if as_json:
            found = [_describe_json(source, i) for i in ids]
            print_json(found[0] if len(found) == 1 else found)
            return
        for exp_id in ids:
            _describe_text(source, exp_id, store)


def _describe_json(reads: "Union[Reads, Queries]", experiment_id: int) -> dict[str, Any]:
    from hpcdet.records import stored_form
    from hpcdet.views.experiments import daemon_faults, describe_experiment, experiment_dict
    from hpcdet.views.trials import trial_dict

    view = describe_experiment(reads, experiment_id)
    return {
        "experiment": experiment_dict(view.experiment),
        "config": view.config,
        # the stored row, and its JSON columns decoded (hparams, metadata, alerts)
        "trials": [{**stored_form(t.trial), **trial_dict(t.trial)} for t in view.trials],
        "runs": [stored_form(r) for r in view.runs],
        "arrays": [stored_form(a) for a in view.arrays],
        **usage.describe_json(view),  # slot-hours and idle GPUs
        # what the running daemon skips now for an I/O error and retries every round
        "faults": [f.to_dict() for f in daemon_faults(paths(), experiment_id)],
    }


def _describe_text(reads: "Union[Reads, Queries]", experiment_id: int,
                   workloads_from: "Optional[Queries]") -> None:
    from hpcdet.views.experiments import daemon_faults, describe_experiment, describe_sheets

    view = describe_experiment(reads, experiment_id)
    exp = view.experiment
    searcher = view.searcher
    console.print(f"Experiment {exp.id}: {exp.name}   state {exp.state}   backend {exp.backend}"
                  f"   progress {exp.progress:.1%}")
    if exp.error:
        console.print(f"error: {exp.error}")
    for fault in daemon_faults(paths(), exp.id):
        console.print(f"fault: {fault.what} fails since {when(fault.since)} ({fault.rounds} "
                      f"rounds), retried every round; the experiment ends in ERROR if it "
                      f"lasts: {fault.error}", markup=False)
    if exp.description:
        console.print(f"description: {exp.description}")
    labels = exp.labels
    if labels or exp.archived:
        console.print(f"labels: {', '.join(labels)}" + ("   archived" if exp.archived else ""))
    console.print(f"searcher {searcher.get('name')}  metric {searcher.get('metric')}  "
                  f"smaller_is_better {searcher.get('smaller_is_better', True)}")
    if view.best is not None:
        console.print(f"best trial: {view.best.trial_id} ({view.best.metric} = "
                      f"{view.best.value})")
    usage.print_usage(view)
    table(
        ["Trial ID", "Request", "State", "Status", "Hyperparameters", "Restarts", "Searcher",
         "Ckpt Steps", "Best Validation", "Latest Checkpoint", "Reason"],
        [[t.id, t.request_id, t.state, t.status, json.dumps(t.hparams), t.restarts, row.searcher,
          t.steps_completed, t.best_validation, t.latest_checkpoint, t.end_reason]
         for row in view.trials for t in [row.trial]],
        title="Trials",
    )
    table(
        ["Trial ID", "Run", "Job ID", "State", "Reason", "Exit Code", "Submitted", "Ended",
         "Outcome", usage.used_header(view)],
        [[r.trial_id, r.run_id, r.job_id, r.state, r.reason, r.exit_code, when(r.submitted),
          when(r.ended), r.outcome, usage.used_cell(view, r)] for r in view.runs],
        title="Jobs",
    )
    if workloads_from is not None:
        workloads = describe_sheets(workloads_from, [experiment_id], True)[-1]
        table(workloads.columns, [[when(v) if i == 3 else v for i, v in enumerate(row)]
                                  for row in workloads.rows], title="Workloads")


@app.command()
def pause(experiment_id: ExperimentId) -> None:
    """Checkpoint and stop the experiment's trials; `activate` resumes them."""
    console.print(connect(paths()).send(Pause(experiment_id)))


@app.command()
def activate(experiment_id: ExperimentId) -> None:
    """Resume a paused experiment from its latest checkpoints."""
    console.print(connect(paths()).send(Activate(experiment_id)))


@app.command()
def kill(experiment_id: ExperimentId) -> None:
    """Stop the experiment's trials at once."""
    console.print(connect(paths()).send(Kill(experiment_id)))


app.command("unpause", hidden=True)(activate)


@app.command()
def cancel(experiment_id: ExperimentId) -> None:
    """Stop the experiment gracefully: running trials checkpoint first."""
    console.print(connect(paths()).send(Cancel(experiment_id)))


@app.command("continue")
def continue_(
    experiment_id: ExperimentId,
    config: Annotated[Optional[list[str]], typer.Option(
        "--config", help="Override a config field (single searcher only): key=value.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", "--follow-first-trial")] = False,
) -> None:
    """Resume a finished experiment's trials from their latest checkpoints."""
    import yaml

    from hpcdet.config import load_experiment_config

    p = paths()
    overrides = None
    if config:
        stored = lookups.experiment(read_store(p), experiment_id).stored_config
        overrides = load_experiment_config(yaml.safe_dump(stored), config).raw
    console.print(connect(p).send(Continue(experiment_id, overrides)))
    if follow:
        trial = lookups.trials(read_store(p), experiment_id)[0]
        raise typer.Exit(follow_trial(p, trial.id))


@app.command()
def config(experiment_id: ExperimentId) -> None:
    """Print the experiment's config (YAML), as hpcdet runs it: defaults filled in."""
    import yaml

    stored = lookups.experiment(read_store(paths()), experiment_id).stored_config
    print(yaml.safe_dump(stored, sort_keys=False), end="")


@app.command()
def wait(
    experiment_id: ExperimentId,
    polling_interval: Annotated[float, typer.Option(
        "--polling-interval", min=0.1, help="Seconds between checks.")] = 5.0,
) -> None:
    """Wait until the experiment ends; exit 1 (saying how it ended) unless it COMPLETED."""
    p = paths()
    store = read_store(p)
    while (state := lookups.experiment(store, experiment_id).state) not in \
            FINAL_EXPERIMENT_STATES:
        time.sleep(polling_interval)
    if state != ExperimentState.COMPLETED:
        print(f"Experiment {experiment_id} ended as {state}", file=sys.stderr)
        raise typer.Exit(1)


@app.command()
def archive(experiment_id: ExperimentId) -> None:
    """Hide a finished experiment from `experiment list` (--all shows it)."""
    console.print(connect(paths()).send(SetExperiment(experiment_id, "archived", True)))


@app.command()
def unarchive(experiment_id: ExperimentId) -> None:
    """Show an archived experiment in `experiment list` again."""
    console.print(connect(paths()).send(SetExperiment(experiment_id, "archived", False)))


@app.command()
def delete(
    experiment_id: ExperimentId,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask first.")] = False,
) -> None:
    """Delete a finished experiment: its checkpoints' files, logs, metrics and records."""
    if not yes:
        typer.confirm(f"Deleting experiment {experiment_id} removes its checkpoints, logs and "
                      "metrics for good. Do you still wish to proceed?", abort=True)
    console.print(connect(paths()).send(DeleteExperiment(experiment_id)))


@app.command()
def logs(
    experiment_id: ExperimentId, follow: Follow = False, head: Head = None, tail: Tail = None,
    rank_ids: RankIds = None, level: Level = None, as_json: JsonLines = False,
    after: After = None, before: Before = None,
) -> None:
    """The logs of the experiment's first trial, with `trial logs`' options."""
    trials = lookups.trials(read_store(paths()), experiment_id)
    if not trials:
        raise NotFoundError(f"experiment {experiment_id} has no trials yet")
    raise typer.Exit(show_logs(trials[0].id, follow, head, tail, rank_ids, level, as_json,
                              after, before))


@app.command("list-trials")
def list_trials(
    experiment_id: ExperimentId,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many.")] = 1000,
    offset: Annotated[int, typer.Option("--offset", min=0, help="Skip this many first.")] = 0,
    csv: Annotated[bool, typer.Option("--csv")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The experiment's trials."""
    from hpcdet.views.experiments import describe_experiment
    from hpcdet.views.trials import trial_dict

    with open_reads(paths()) as reads:
        view = describe_experiment(reads, experiment_id)
    trials = view.trials[offset:offset + limit]
    if as_json:
        print_json([trial_dict(row.trial) for row in trials])
        return
    cols = ["Trial ID", "State", "H-Params", "Started", "Ended", "# of Batches"]
    rows = [[t.id, t.state, json.dumps(t.hparams), when(t.started), when(t.ended),
             t.steps_completed] for row in trials for t in [row.trial]]
    print_csv(cols, rows) if csv else table(cols, rows)


app.command("lt", hidden=True)(list_trials)
app.command("list-checkpoints")(checkpoint.list_)
app.command("lc", hidden=True)(checkpoint.list_)


@app.command()
def download(
    experiment_id: ExperimentId,
    output_dir: Annotated[Path, typer.Option(
        "--output-dir", "-o", help="Each checkpoint goes into OUTPUT_DIR/UUID.")]
    = Path("checkpoints"),
    top_n: Annotated[int, typer.Option("--top-n", min=1, help="How many of the best.")] = 1,
    sort_by: Annotated[Optional[str], typer.Option(
        "--sort-by", help="A validation metric to rank by (default: the searcher's).")] = None,
    smaller_is_better: Annotated[Optional[str], typer.Option(
        "--smaller-is-better", help="With --sort-by: true or false.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the paths.")] = False,
) -> None:
    """Copy the experiment's best checkpoints here."""
    if (sort_by is None) != (smaller_is_better is None):
        raise UsageError("--sort-by and --smaller-is-better must be set together")
    from hpcdet.views.checkpoints import ranked_checkpoints

    smaller = truth("--smaller-is-better", smaller_is_better)
    best = ranked_checkpoints(read_store(paths()), paths(), experiment_id, top_n,
                              sort_by=sort_by, smaller_is_better=smaller)
    if not best.checkpoints:
        raise NotFoundError(f"experiment {experiment_id} has no checkpoint with a validation "
                            "metric to rank it by")
    for c in best.checkpoints:
        checkpoint.download_checkpoint(c.checkpoint.uuid, output_dir / c.checkpoint.uuid, quiet)
        if not quiet:
            print()
