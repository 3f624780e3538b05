"""`hpcdet cluster show`."""

from __future__ import annotations

import typer

from hpcdet.cli.common import console, table
from hpcdet.config.cluster import load_cluster_config
from hpcdet.errors import SchedulerCommandError
from hpcdet.schedulers import make_scheduler
from hpcdet.schedulers.runner import CommandRunner

app = typer.Typer(no_args_is_help=True)


@app.command()
def show() -> None:
    """The effective cluster settings and what the scheduler reports."""
    cfg = load_cluster_config()
    table(["Setting", "Value", "From"], cfg.describe(), title="hpcdet cluster settings")
    scheduler = make_scheduler(cfg.backend, {"jobs_dir": "", "template_dir": cfg.template_dir})
    console.print(f"backend in use: {scheduler.name}")
    runner = CommandRunner(timeout=30)
    try:
        outputs = [runner.run(cmd).stdout for cmd in scheduler.info_commands()]
    except SchedulerCommandError as e:
        console.print(f"the scheduler did not answer: {e}", markup=False)
        raise typer.Exit(1) from None
    rows = scheduler.parse_info(outputs)
    if rows:
        table(["What", "The scheduler reports"], rows, title=f"{scheduler.name}")
