"""`hpcdet job list|update`: the queue of hpcdet's jobs (experiments)."""

from __future__ import annotations

import getpass
from dataclasses import asdict
from typing import Annotated, Optional

import typer

from hpcdet.cli.common import console, paths, print_json, read_store, table, when
from hpcdet.config.cluster import load_cluster_config
from hpcdet.daemon import process
from hpcdet.errors import NotFoundError, SchedulerCommandError
from hpcdet.queue import queue
from hpcdet.schedulers import make_scheduler
from hpcdet.schedulers.runner import CommandRunner

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_(
    resource_pool: Annotated[Optional[str], typer.Option("--resource-pool", "-p")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Jobs in the order they would start: not yet submitted, pending, running."""
    store = read_store(paths())
    scheduler = make_scheduler(load_cluster_config().backend, {"jobs_dir": str(
        paths().local_dir() / "local-jobs")})
    try:
        out = CommandRunner(timeout=30).run(scheduler.status_command([])).stdout
        statuses = scheduler.parse_status(out)
    except SchedulerCommandError as e:
        console.print(f"the scheduler did not answer ({e}); showing stored states",
                      markup=False)
        statuses = {}
    trials = store.trials()
    runs = store.runs([t.id for t in trials], live_only=True)
    rows = [r for r in queue(store.experiments(unfinished=True), trials, runs, statuses)
            if resource_pool is None or r.resource_pool == resource_pool]
    if as_json:
        print_json([asdict(r) for r in rows])
        return
    user = getpass.getuser()
    table(
        ["#", "ID", "Type", "Job Name", "Priority", "Submitted", "Slots (acquired/needed)",
         "Status", "User"],
        [[i, r.job_id, "TYPE_EXPERIMENT", r.name, r.priority, when(r.submitted),
          f"{r.acquired}/{r.needed}", f"{r.state} ({r.reason})" if r.reason else r.state, user]
         for i, r in enumerate(rows)],
    )


app.command("ls", hidden=True)(list_)


@app.command()
def update(
    job_id: str,
    priority: Annotated[Optional[int], typer.Option("--priority", "-p",
                        help="1..99, lower is more important; default 42")] = None,
) -> None:
    """Change a job's priority; it applies to all its scheduler jobs, now and later."""
    p = paths()
    exp_id = _experiment_of(job_id)
    if priority is None:
        console.print("nothing to update: give --priority")
        raise typer.Exit(1)
    process.call(p, "update_job", {"exp_id": exp_id, "priority": priority})


def _experiment_of(job_id: str) -> int:
    """An hpcdet job id (the experiment id) or one of its scheduler job ids."""
    store = read_store(paths())
    if job_id.isdigit() and any(e.id == int(job_id) for e in store.experiments()):
        return int(job_id)
    for trial in store.trials():
        for run in store.runs([trial.id]):
            if run.job_id and job_id in (run.job_id, run.job_id.split("_")[0]):
                return int(trial.experiment_id)
    raise NotFoundError(f"no job {job_id!r}; see `hpcdet job list`")
