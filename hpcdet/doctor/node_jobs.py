"""Tiny probe jobs through the batch system, all submitted at once and waited for together
until their result files appear, they end, or the deadline passes; what is left is canceled.

The jobs' scripts are built here from quoted values; the submission command is the backend's
(`SiteProbe.submit_command`) and status and cancel are the `Scheduler`'s, all run by the one
command runner.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hpcdet.errors import SchedulerCommandError
from hpcdet.schedulers import JobStatus, Scheduler
from hpcdet.schedulers.runner import CommandRunner
from hpcdet.schedulers.site_probe import SiteProbe
from hpcdet.states import JobState

POLL_SECONDS = 1.0


@dataclass(frozen=True)
class ProbeJob:
    name: str
    script: str
    nodes: int
    results: tuple[Path, ...]  # the job is done when all of these exist


@dataclass
class Outcome:
    job_id: str = ""
    refused: str = ""  # the submission's error output
    done: bool = False
    ended: bool = False  # it left the queue, or ended, without all its results
    status: JobStatus | None = None  # the last the scheduler said
    output: Path | None = None

    def tail(self, lines: int = 3) -> str:
        try:
            text = self.output.read_text(errors="replace") if self.output else ""
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])


@dataclass
class Prober:
    scheduler: Scheduler
    probe: SiteProbe
    runner: CommandRunner
    work: Path
    pool: str | None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    def run(self, jobs: list[ProbeJob], seconds: float) -> dict[str, Outcome]:
        """Submit ``jobs``, wait up to ``seconds`` for them, cancel what is left."""
        deadline = self.clock() + seconds
        minutes = max(2, int(seconds // 60) + 2)
        outcomes = {job.name: self._submit(job, minutes) for job in jobs}
        waiting = {j.name: j for j in jobs if outcomes[j.name].job_id}
        missing_twice: set[str] = set()
        while waiting and self.clock() < deadline:
            for name, job in list(waiting.items()):
                if all(p.exists() for p in job.results):
                    outcomes[name].done = True
                    del waiting[name]
            if not waiting:
                break
            listed = self._status([outcomes[n].job_id for n in waiting])
            for name in list(waiting):
                found = listed.get(outcomes[name].job_id)
                outcomes[name].status = found or outcomes[name].status
                gone = found is None or found.state in _ENDED
                # A result written as the job ends may reach this node's view a little late.
                if gone and name in missing_twice:
                    outcomes[name].ended = True
                    del waiting[name]
                elif gone:
                    missing_twice.add(name)
            self.sleep(POLL_SECONDS)
        left = [outcomes[n].job_id for n in waiting]
        if left:
            self.runner.run(self.scheduler.cancel_command(left), check=False)
        return outcomes

    def _submit(self, job: ProbeJob, minutes: int) -> Outcome:
        script = self.work / f"{job.name}.sh"
        write_private(script, job.script)
        output = self.work / f"{job.name}.out"
        cmd = self.probe.submit_command(script, name=f"hpcdet-doctor-{job.name}",
                                        nodes=job.nodes, pool=self.pool, output=output,
                                        minutes=minutes)
        try:
            result = self.runner.run(cmd, check=False, cwd=self.work)
        except SchedulerCommandError as e:
            return Outcome(refused=str(e), output=output)
        if result.exit_code != 0:
            said = (result.stderr.strip() or result.stdout.strip() or "no output")
            return Outcome(refused=f"exit {result.exit_code}: {said}", output=output)
        try:
            return Outcome(job_id=self.scheduler.parse_job_id(result.stdout), output=output)
        except ValueError as e:
            return Outcome(refused=str(e), output=output)

    def _status(self, job_ids: list[str]) -> dict[str, JobStatus]:
        try:
            result = self.runner.run(self.scheduler.status_command(job_ids), check=False)
        except SchedulerCommandError:
            return {}
        if not self.scheduler.answered(result.exit_code, result.stderr):
            return {}
        return self.scheduler.parse_status(result.stdout)


_ENDED = {JobState.COMPLETED, JobState.FAILED, JobState.CANCELED, JobState.TIMEOUT,
          JobState.NODE_FAIL, JobState.PREEMPTED}


def write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def fs_script(targets: dict[Path, Path], runtime: str, registry: tuple[str, int]) -> str:
    """Each target directory -> the result file the job writes there: its host, the
    filesystem type as the node sees the directory (``stat -f -c %T``), where the runtime is
    on the node's PATH (empty if not), and whether a TCP connection to the image registry
    (host, port) opened within 5 s ("reachable" or "unreachable")."""
    host, port = registry
    lines = ["#!/bin/bash", "set -u",
             # bash's /dev/tcp: nothing to install on the node; DNS and connect both count.
             f"if timeout 5 bash -c {shlex.quote(f'exec 3<>/dev/tcp/{host}/{port}')} "
             "2>/dev/null; then reach=reachable; else reach=unreachable; fi",
             "probe() {",
             f'  {{ hostname; stat -f -c %T "$1"; command -v {shlex.quote(runtime)} || echo; '
             'echo "$reach"; } > "$2.tmp" && mv "$2.tmp" "$2"', "}"]
    lines += [f"probe {shlex.quote(str(d))} {shlex.quote(str(f))}" for d, f in targets.items()]
    return "\n".join(lines) + "\n"


def net_script(on_each_node: str, python: str, probe: Path, work: Path, seconds: int) -> str:
    """Two nodes, one process each, exchanging bytes over TCP (`hpcdet.doctor.net_probe`)."""
    return ("#!/bin/bash\nset -u\n"
            f"{on_each_node} /usr/bin/env {shlex.quote(python)} {shlex.quote(str(probe))} "
            f"{shlex.quote(str(work))} {seconds}\n")


__all__ = ["Outcome", "ProbeJob", "Prober", "fs_script", "net_script", "write_private"]
