"""Keeping the daemon deciding while its user is away: ``hpcdet daemon supervise``.

- ``cron``: this login node's crontab runs ``hpcdet daemon ensure`` every few minutes. A
  crontab is its host's alone: the other login nodes of a cluster do not run it.
- ``scrontab``: Slurm's cron (Slurm 20.11 and later, where the site set
  ``ScronParameters=enable``) runs ``hpcdet daemon ensure --foreground`` every few minutes as
  a 1-CPU job: the daemon runs in that job until its walltime, and the next one starts it again.
- ``job``: a 1-CPU batch job runs the daemon until its walltime. As it starts it queues its
  successor, which waits in the queue for its end, whatever ends it (``afterany``), and then
  for the lease (``protocol/lease.py``).

Commands are built as data and the tables' text is edited by pure functions; ``Supervisor``
runs them through the one command runner. What is installed is recorded in
``<state>/supervision.json``, which ``hpcdet daemon status`` shows.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hpcdet.config.cluster import ClusterConfig
from hpcdet.config.schema import format_walltime
from hpcdet.errors import HpcdetError, SchedulerCommandError, UsageError
from hpcdet.paths import StatePaths, hostname
from hpcdet.private import hpcdet_command, private_dir
from hpcdet.rundir.atomic import read_json, write_atomic
from hpcdet.schedulers.runner import CommandRunner
from hpcdet.schedulers.templating import render

VIA = ("cron", "scrontab", "job")
# The command that edits each one's table.
TABLES = {"cron": "crontab", "scrontab": "scrontab"}
RECORD = "supervision.json"
# A day: what most sites allow a 1-CPU job; the cluster config's walltime or --walltime
# says otherwise.
DEFAULT_WALLTIME = 24 * 3600
# What the supervised daemon sees of the environment supervise ran in: where the state and the
# cluster config are, and the PATH that finds sbatch/qsub (cron's own is /usr/bin:/bin).
CARRIED = ("PATH", "HOME", "USER", "LOGNAME")


def carried_env(env: Mapping[str, str], on_this_host: bool) -> dict[str, str]:
    """``HPCDET_LOCAL_DIR`` names a directory of this host's: a daemon on a compute node
    takes that node's own local directory."""
    return {k: v for k, v in sorted(env.items())
            if k in CARRIED or k.startswith("HPCDET_")
            and (on_this_host or k != "HPCDET_LOCAL_DIR")}


def ensure_command(env: Mapping[str, str], foreground: bool = False, wait: bool = False,
                   python: str | None = None) -> str:
    """The shell command that runs ``hpcdet daemon ensure`` with ``env``; ``foreground``:
    in a batch job, on a compute node."""
    argv = [*hpcdet_command("hpcdet.cli.entry", python), "daemon", "ensure"]
    argv += ["--foreground"] * foreground + ["--wait"] * wait
    assigns = [f"{k}={shlex.quote(v)}" for k, v in carried_env(env, not foreground).items()]
    return " ".join(["env", *assigns, *(shlex.quote(a) for a in argv)])


def job_name(root: Path) -> str:
    """The supervising jobs' name: one chain per state directory."""
    return f"hpcdet-daemon-{hashlib.sha1(str(root).encode()).hexdigest()[:8]}"


def _marks(root: Path) -> tuple[str, str]:
    return f"# hpcdet daemon supervise: {root}", f"# end of hpcdet daemon supervise: {root}"


def without_block(table: str, root: Path) -> str:
    """``table`` (a crontab) without this state directory's entry."""
    begin, end = _marks(root)
    kept: list[str] = []
    inside = False
    for line in table.splitlines():
        if line == begin:
            inside = True
        elif line == end and inside:
            inside = False
        elif not inside:
            kept.append(line)
    return "".join(f"{line}\n" for line in kept)


def with_block(table: str, root: Path, lines: list[str]) -> str:
    begin, end = _marks(root)
    return without_block(table, root) + "".join(f"{line}\n" for line in [begin, *lines, end])


def _cron_escaped(command: str) -> str:
    # crontab(5): an unescaped % ends the command; what follows is its standard input.
    return command.replace("%", "\\%")


def cron_lines(every: int, command: str, log: Path) -> list[str]:
    # cron's shell has cron's umask (022): the log is made private as all of hpcdet's files.
    return [_cron_escaped(
        f"*/{every} * * * * umask 077; {command} >> {shlex.quote(str(log))} 2>&1")]


def scron_lines(every: int, command: str, name: str, walltime: int, log: Path,
                cluster: ClusterConfig) -> list[str]:
    options = [f"--job-name={name}", "--cpus-per-task=1", f"--time={format_walltime(walltime)}",
               f"--output={log}"]
    options += [f"--{key}={value}" for key, value in
                (("partition", cluster.partition_for("")), ("account", cluster.account),
                 ("qos", cluster.qos)) if value]
    return [f"#SCRON {' '.join(shlex.quote(o) for o in options)}",
            _cron_escaped(f"*/{every} * * * * umask 077; {command}")]


def table_text(via: str, result_stdout: str, result_stderr: str, code: int) -> str:
    """What ``crontab -l`` / ``scrontab -l`` answered: the table, "" when the user has none."""
    if code == 0:
        return result_stdout
    if "no crontab" in (result_stderr + result_stdout).lower():
        return ""
    raise HpcdetError(f"`{via} -l` failed ({code}): {result_stderr.strip()}")


def describe(paths: StatePaths) -> str:
    """How the daemon of ``paths`` is supervised, for ``hpcdet daemon status``."""
    record = read_json(paths.root / RECORD)
    if not isinstance(record, dict) or record.get("via") not in VIA:
        return ("none: nothing starts the daemon again if it dies until an hpcdet command "
                "runs (`hpcdet daemon supervise --via cron|scrontab|job`)")
    since = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(record.get("since", 0))))
    via = record["via"]
    if via == "cron":
        return (f"cron on {record.get('host')}, `hpcdet daemon ensure` every "
                f"{record.get('every')} min since {since} (log: {record.get('log')})")
    walltime = format_walltime(int(record.get("walltime", DEFAULT_WALLTIME)))
    if via == "scrontab":
        return (f"scrontab, every {record.get('every')} min a 1-CPU job {record.get('name')} "
                f"of up to {walltime} since {since}")
    return (f"batch jobs {record.get('name')} (1 CPU, {walltime} each, each queueing its "
            f"successor) since {since}; the first was job {record.get('first_job')}")


class Supervisor:
    """Installs and removes the supervision of one state directory's daemon."""

    def __init__(self, paths: StatePaths, cluster: ClusterConfig,
                 runner: CommandRunner | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.paths = paths
        self.cluster = cluster
        self.runner = runner or CommandRunner()
        self.env = dict(os.environ if env is None else env)
        self.log_dir = paths.root / "supervise"

    def record(self) -> dict[str, Any]:
        got = read_json(self.paths.root / RECORD)
        return got if isinstance(got, dict) else {}

    def install(self, via: str, every: int = 5, walltime: int | None = None) -> str:
        if via not in VIA:
            raise UsageError(f"--via must be one of {', '.join(VIA)}; got {via!r}")
        if not 1 <= every <= 59:
            raise UsageError(f"--every must be 1 to 59 minutes; got {every}")
        private_dir(self.log_dir)
        self._remove_all()
        walltime = walltime or self.cluster.walltime_seconds or DEFAULT_WALLTIME
        record: dict[str, Any] = {"via": via, "since": time.time(), "host": hostname()}
        if via == "cron":
            log = self.paths.local_dir() / "supervise.log"
            self._edit("crontab", lambda t: with_block(
                t, self.paths.root, cron_lines(every, ensure_command(self.env), log)))
            record.update(every=every, log=str(log))
            said = (f"supervised by cron on {hostname()}: `hpcdet daemon ensure` every "
                    f"{every} min (log: {log}). A crontab is this login node's alone.")
        elif via == "scrontab":
            name = job_name(self.paths.root)
            command = ensure_command(self.env, foreground=True)
            self._edit("scrontab", lambda t: with_block(t, self.paths.root, scron_lines(
                every, command, name, walltime, self.log_dir / "scron-%j.out",
                self.cluster)))
            record.update(every=every, name=name, walltime=walltime)
            said = (f"supervised by scrontab: every {every} min a 1-CPU job ({name}, up to "
                    f"{format_walltime(walltime)}) runs the daemon unless one runs")
        else:
            name, job = self._submit_job(walltime)
            record.update(name=name, walltime=walltime, first_job=job)
            said = (f"supervised by batch jobs: job {job} ({name}, 1 CPU, "
                    f"{format_walltime(walltime)}) runs the daemon, and each job queues its "
                    f"successor. A daemon running now keeps serving until it stops; the job's "
                    f"takes over then (`hpcdet daemon stop` hands over at once)")
        write_atomic(self.paths.root / RECORD, record, mode=0o600)
        return said

    def remove(self) -> str:
        was = self.record().get("via")
        self._remove_all()
        (self.paths.root / RECORD).unlink(missing_ok=True)
        return f"supervision by {was} removed" if was else "the daemon was not supervised"

    # ------------------------------------------------------------------ the commands

    def _edit(self, program: str, change: Callable[[str], str]) -> None:
        """The user's table (``crontab`` or ``scrontab``) as ``change`` makes it."""
        try:
            got = self.runner.run([program, "-l"], check=False)
        except SchedulerCommandError as e:
            if e.exit_code != 127:
                raise
            raise HpcdetError(f"`{program}` is not installed on this host: supervise the "
                              f"daemon another way (--via cron, scrontab or job)") from None
        before = table_text(program, got.stdout, got.stderr, got.exit_code)
        after = change(before)
        if after != before:
            self.runner.run([program, "-"], stdin=after)

    def _remove_all(self) -> None:
        """Whatever supervises this state directory now, by any means."""
        record = self.record()
        via = record.get("via")
        if via in ("cron", "scrontab"):
            if via == "cron" and record.get("host") not in (None, hostname()):
                raise HpcdetError(
                    f"cron supervises this daemon on login node {record['host']}, whose "
                    f"crontab this one cannot edit: run `hpcdet daemon supervise --off` there")
            self._edit(TABLES[via], lambda t: without_block(t, self.paths.root))
        elif via == "job":
            self._cancel_jobs()

    def _backend(self) -> str:
        from hpcdet.schedulers import detect_backend

        return detect_backend() if self.cluster.backend == "auto" else self.cluster.backend

    def _submit_job(self, walltime: int) -> tuple[str, str]:
        backend = self._backend()
        if backend not in ("slurm", "pbs"):
            raise UsageError(f"--via job needs a batch system; this cluster's backend is "
                             f"{backend} (`hpcdet cluster show`)")
        name = job_name(self.paths.root)
        script = self.log_dir / f"daemon-job.{backend}.sh"
        text = render(f"supervisor.{backend}.j2", {
            "name": name, "log_dir": self.log_dir, "script": script,
            "walltime": format_walltime(walltime),
            "partition": self.cluster.partition_for(""), "account": self.cluster.account,
            "qos": self.cluster.qos, "python": sys.executable,
            "ensure": ensure_command(self.env, foreground=True, wait=True),
        }, self.cluster.template_dir)
        script.write_text(text)
        script.chmod(0o700)
        submit = ["sbatch", "--parsable", str(script)] if backend == "slurm" else [
            "qsub", str(script)]
        try:
            out = self.runner.run(submit, cwd=self.log_dir).stdout.strip()
        except SchedulerCommandError as e:
            raise HpcdetError(f"the supervising job was refused: {e}") from None
        return name, out.split(";")[0]

    def _cancel_jobs(self) -> None:
        name = job_name(self.paths.root)
        if self._backend() == "slurm":
            self.runner.run(["scancel", f"--user={getpass.getuser()}", f"--name={name}"],
                            check=False)
            return
        got = self.runner.run(["qselect", "-u", getpass.getuser(), "-N", name], check=False)
        ids = got.stdout.split()
        if ids:
            self.runner.run(["qdel", *ids], check=False)
