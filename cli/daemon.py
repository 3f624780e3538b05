"""`hpcdet daemon start|stop|status|ensure|supervise`."""

import os
import sys
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


@app.command()
def ensure(
    foreground: bool = typer.Option(
        False, "--foreground", help="Run the daemon in this process (in a batch job)."),
    wait: bool = typer.Option(
        False, "--wait", help="With --foreground: while a daemon serves elsewhere, wait for "
        "its end and then take over, instead of returning."),
) -> None:
    """Start the daemon unless one serves, here or on another host; quick and silent when
    one does. For cron, scrontab and batch jobs (`hpcdet daemon supervise`)."""
    from hpcdet.private import hpcdet_command
    from hpcdet.protocol import process

    p = paths()
    current = process.info(p)
    while wait and current.alive and not current.here:
        holder = current.holder
        time.sleep(max(5.0, (holder.lease if holder else 120.0) / 8))
        current = process.info(p)
    if current.alive:
        return
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    gone = current.holder
    last = (f"; the last one ran on {gone.where()}, last heard from {when(gone.heartbeat)}"
            if gone else "")
    if foreground:
        console.print(f"{stamp} running the daemon in this process{last}", markup=False)
        sys.stdout.flush()
        command = hpcdet_command("hpcdet.daemon")
        os.execve(command[0], command, dict(os.environ, HPCDET_HOME=str(p.root)))
    current = process.start(p)
    console.print(f"{stamp} daemon started on host {current.record.get('host')}, pid "
                  f"{current.record.get('pid')}{last}", markup=False)


@app.command()
def supervise(
    via: str = typer.Option("", "--via", help="cron (this login node's crontab), scrontab "
                            "(Slurm's cron) or job (the daemon in a batch job)."),
    every: int = typer.Option(5, "--every", help="Minutes between checks (cron, scrontab)."),
    walltime: str = typer.Option("", "--walltime", help="Each job's walltime (scrontab, job); "
                                 "default the cluster config's, else 24:00:00."),
    off: bool = typer.Option(False, "--off", help="Remove the supervision."),
) -> None:
    """Keep the daemon running while you are away: checked every few minutes and started
    again by cron or scrontab, or run in a batch job that queues its successor."""
    from hpcdet.config.cluster import load_cluster_config
    from hpcdet.config.schema import parse_walltime
    from hpcdet.supervision import Supervisor

    supervisor = Supervisor(paths(), load_cluster_config())
    if off:
        console.print(supervisor.remove(), markup=False)
        return
    if not via:
        raise typer.BadParameter("say how: --via cron, --via scrontab or --via job "
                                 "(or --off)", param_hint="--via")
    try:
        seconds = parse_walltime(walltime) if walltime else None
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--walltime") from None
    console.print(supervisor.install(via, every, seconds), markup=False)


def _warn_if_open(p: StatePaths) -> None:
    for place in dict.fromkeys([p.root, p.local_dir()]):
        open_to = exposure(place, sharing() if place == p.root else False)
        if open_to:
            console.print(f"warning: {open_to}; unless you share it on purpose "
                          f"(share_with_group in the cluster config), run: chmod go= {place}",
                          markup=False)


def _print_supervision(p: StatePaths) -> None:
    from hpcdet.supervision import describe

    console.print(f"supervision: {describe(p)}", markup=False)


def _print_faults(status: dict[str, Any]) -> None:
    from hpcdet.views.experiments import faults_in

    for fault in faults_in(status):
        console.print(f"fault: experiment {fault.experiment_id}: {fault.what} fails since "
                      f"{when(fault.since)} ({fault.rounds} rounds), skipped and retried every "
                      f"round; the other experiments go on: {fault.error}", markup=False)


def _print_webhook_failures(status: dict[str, Any]) -> None:
    from hpcdet.views.webhooks import failures_in

    for f in failures_in(status):
        fate = "given up" if f.gave_up else "retried"
        console.print(f"webhook failing: {f.name} ({f.host}): {f.error} at {when(f.when)}, "
                      f"{f.attempts} attempts, {fate}", markup=False)


@app.command()
def status() -> None:
    """Where the daemon runs, since when, how it is supervised, its last tick and decision,
    the live jobs, and whether the scheduler answers it."""
    from hpcdet.protocol import process

    p = paths()
    current = process.info(p)
    fstype = fstype_of(p.root if p.root.exists() else p.root.parent)
    console.print(f"state directory: {p.root} ({fstype})")
    if current.alive and not current.here:
        console.print(f"database: {current.record.get('database')} on host "
                      f"{current.record.get('host')}; commands here read the copy it makes "
                      f"in {p.database_copy().parent}")
    elif is_network_fs(fstype):
        console.print(f"database: {p.database()} (local disk: the state directory is on a "
                      f"network filesystem, where SQLite is unsafe)")
    else:
        console.print(f"database: {p.database()}")
    _warn_if_open(p)
    _print_supervision(p)
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
        silent = current.silent()
        if silent:
            console.print(f"warning: {silent}", markup=False)
    if current.alive and st:
        console.print(f"uptime: {time.time() - st['started']:.0f} s   backend: {st['backend']}")
        console.print(f"last tick: {when(st['last_tick'])}   last decision: "
                      f"{when(st.get('last_decision')) if st.get('last_decision') else 'none yet'}"
                      f"   scheduler polls: {st['polls']}   scheduler calls: "
                      f"{st['scheduler_calls']}")
        console.print(f"live jobs: {' '.join(st['live_jobs']) or 'none'}")
        _print_faults(st)
        _print_webhook_failures(st)
        if st.get("submissions_held"):
            console.print(f"submissions held: the scheduler refused one for now "
                          f"({st['submissions_held']}); it is tried again shortly")
    unreachable = current.unreachable()
    if unreachable:
        console.print(f"warning: {unreachable}", markup=False)
    if not current.alive:
        raise typer.Exit(1)
