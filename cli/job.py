"""`hpcdet job list|update`: the queue of hpcdet's jobs (experiments)."""

import re
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from hpcdet.cli.common import console, paths, print_csv, print_json, read_store, table, when
from hpcdet.errors import UsageError
from hpcdet.link import connect
from hpcdet.protocol.messages import JobUpdate, UpdateJobs

if TYPE_CHECKING:
    from hpcdet.schedulers import Scheduler
    from hpcdet.views.queue import QueueRow

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_(
    resource_pool: Annotated[Optional[str], typer.Option("--resource-pool", "-p")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many.")] = 100,
    offset: Annotated[int, typer.Option("--offset", min=0, help="Skip this many first.")] = 0,
    reverse: Annotated[bool, typer.Option(
        "--reverse", help="Last to start first.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    as_yaml: Annotated[bool, typer.Option("--yaml")] = False,
    csv: Annotated[bool, typer.Option("--csv")] = False,
) -> None:
    """Jobs in the order they would start: not yet submitted, pending, running."""
    from hpcdet.views.queue import job_queue, scheduler_statuses

    if [as_json, as_yaml, csv].count(True) > 1:
        raise UsageError("give at most one of --json, --yaml and --csv")
    store = read_store(paths())
    statuses, problem = scheduler_statuses(_scheduler())
    if problem:
        print(f"the scheduler did not answer ({problem}); showing stored states",
              file=sys.stderr)
    ranked = list(enumerate(job_queue(store, statuses, resource_pool)))
    shown = (ranked[::-1] if reverse else ranked)[offset:offset + limit]
    if as_json or as_yaml:
        import yaml

        dicts = [asdict(r) for _, r in shown]
        print_json(dicts) if as_json else print(yaml.safe_dump(dicts, sort_keys=False), end="")
        return
    import getpass

    user = getpass.getuser()
    cols = ["#", "ID", "Type", "Job Name", "Priority", "Submitted", "Slots (acquired/needed)",
            "Status", "User"]
    rows = [[i, r.job_id, r.type, r.name, r.priority, when(r.submitted),
             f"{r.acquired}/{r.needed}", _status(r), user] for i, r in shown]
    print_csv(cols, rows) if csv else table(cols, rows)


def _status(row: "QueueRow") -> str:
    said = [row.reason] if row.reason else []
    if row.expected_start is not None:
        said.append(f"expected to start {when(row.expected_start)}")
    return f"{row.state} ({'; '.join(said)})" if said else row.state


app.command("ls", hidden=True)(list_)


_OPTIONS = {"priority": "--priority", "weight": "--weight", "resource_pool": "--resource-pool",
            "ahead_of": "--ahead-of", "behind_of": "--behind-of"}


@app.command()
def update(
    job_id: str,
    priority: Annotated[Optional[int], typer.Option(
        "--priority", "-p", help="1..99, lower is more important; default 42")] = None,
    weight: Annotated[Optional[float], typer.Option(
        "--weight", "-w", help="fair-share weight: stored, not applied on Slurm/PBS")] = None,
    resource_pool: Annotated[Optional[str], typer.Option(
        "--resource-pool", help="move pending jobs now, running trials after a checkpoint")
    ] = None,
    ahead_of: Annotated[Optional[str], typer.Option(
        "--ahead-of", help="start before this job (takes its priority)")] = None,
    behind_of: Annotated[Optional[str], typer.Option(
        "--behind-of", help="start after this job (takes its priority)")] = None,
) -> None:
    """Change one thing about a job; it applies to all its scheduler jobs, now and later."""
    given = {k: v for k, v in (("priority", priority), ("weight", weight),
             ("resource_pool", resource_pool), ("ahead_of", ahead_of),
             ("behind_of", behind_of)) if v is not None}
    if len(given) != 1:
        raise UsageError(f"give exactly one of {', '.join(_OPTIONS.values())}; to change "
                         "several, use `hpcdet job update-batch JOB.priority=1 ...`")
    (field, value), = given.items()
    _send([(job_id, field, value)])


app.command("u", hidden=True)(update)


@app.command("update-batch")
def update_batch(
    updates: Annotated[list[str], typer.Argument(
        help="JOB.OPERATION=VALUE, OPERATION one of priority, weight, resource-pool, "
             "ahead-of, behind-of")],
) -> None:
    """Several updates at once: all are checked before any is applied."""
    parsed = []
    for text in updates:
        m = re.fullmatch(r"([^.=\s]+)\.([a-z_-]+)=(.+)", text.strip())
        field = m.group(2).replace("-", "_") if m else ""
        if m is None or field not in _OPTIONS:
            raise UsageError(f"{text!r}: Please ensure the update is formatted as "
                             "<jobID>.<operation>=<value>, operation one of priority, weight, "
                             "resource-pool, ahead-of, behind-of.")
        value: object = m.group(3).strip("'\"")
        try:
            if field == "priority":
                value = int(str(value))
            elif field == "weight":
                value = float(str(value))
        except ValueError:
            raise UsageError(f"{text!r}: {field} must be a number") from None
        parsed.append((m.group(1), field, value))
    _send(parsed)


def _scheduler() -> "Scheduler":
    from hpcdet.views.cluster import site_scheduler

    return site_scheduler(paths())


def _send(updates: list[tuple[str, str, object]]) -> None:
    from hpcdet.views.queue import experiment_of

    store = read_store(paths())
    scheduler = _scheduler()
    requests = []
    for job_id, field, value in updates:
        if field in ("ahead_of", "behind_of"):
            value = experiment_of(store, str(value), scheduler)
        requests.append(JobUpdate(experiment_of(store, job_id, scheduler), field, value))
    said = connect(paths()).send(UpdateJobs.of(requests))
    if said:
        console.print(said, markup=False)

