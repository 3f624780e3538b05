"""`hpcdet daemon start|stop|status`."""

import time
from typing import Any

import typer

from hpcdet.cli.common import console, paths, when
from hpcdet.paths import StatePaths, fstype_of, is_network_fs
from hpcdet.private import exposure, sharing

app = typer.Typer(no_args_is_help=True)


@app.command()
def start() -> None:
    """Start the daemon (detached; it outlives your login session)."""
    from hpcdet.protocol import process

    current = process.start(paths())
    console.print(f"daemon running on {current.record['host']}, pid {current.record['pid']}")
    other = current.other_version()
    if other:
        console.print(f"note: {other}", markup=False)


@app.command()
def stop() -> None:
    """Stop the daemon. Jobs keep running; a new daemon picks them up."""
    from hpcdet.protocol import process

    console.print("daemon stopped" if process.stop(paths()) else "no daemon was running")


def _warn_if_open(p: StatePaths) -> None:
    for place in dict.fromkeys([p.root, p.local_dir()]):
        open_to = exposure(place, sharing() if place == p.root else False)
        if open_to:
            console.print(f"warning: {open_to}; unless you share it on purpose "
                          f"(share_with_group in the cluster config), run: chmod go= {place}",
                          markup=False)


def _print_faults(status: dict[str, Any]) -> None:
    from hpcdet.views.experiments import faults_in

    for fault in faults_in(status):
        console.print(f"fault: experiment {fault.experiment_id}: {fault.what} fails since "
                      f"{when(fault.since)} ({fault.rounds} rounds), skipped and retried every "
                      f"round; the other experiments go on: {fault.error}", markup=False)


@app.command()
def status() -> None:
    """Where the daemon runs, since when, its last tick and the live jobs."""
    from hpcdet.protocol import process

    p = paths()
    current = process.info(p)
    fstype = fstype_of(p.root if p.root.exists() else p.root.parent)
    console.print(f"state directory: {p.root} ({fstype})")
    if is_network_fs(fstype):
        console.print(f"database: {p.database()} (local disk: the state directory is on a "
                      f"network filesystem, where SQLite is unsafe)")
    else:
        console.print(f"database: {p.database()}")
    _warn_if_open(p)
    if not current.record:
        console.print("daemon: never started")
        raise typer.Exit(1)
    rec, st = current.record, current.status
    state = "running" if current.alive else "not running"
    console.print(f"daemon: {state} on host {rec.get('host')}, pid {rec.get('pid')}, "
                  f"hpcdet {rec.get('version') or '(earlier, unrecorded)'}")
    other = current.other_version()
    if other:
        console.print(f"note: {other}", markup=False)
    if not current.here:
        console.print(f"last heartbeat: {when(rec.get('heartbeat'))}")
    if current.alive and st:
        console.print(f"uptime: {time.time() - st['started']:.0f} s   backend: {st['backend']}")
        console.print(f"last tick: {when(st['last_tick'])}   scheduler polls: {st['polls']}   "
                      f"scheduler calls: {st['scheduler_calls']}")
        console.print(f"live jobs: {' '.join(st['live_jobs']) or 'none'}")
        _print_faults(st)
        if st.get("submissions_held"):
            console.print(f"submissions held: the scheduler refused one for now "
                          f"({st['submissions_held']}); it is tried again shortly")
    if not current.alive:
        raise typer.Exit(1)
