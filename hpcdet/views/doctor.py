"""`hpcdet doctor`'s findings for the CLI (and any other face): the cluster config loaded and
the doctor run; with ``preemption``, the preemption drill run through the user's daemon."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from hpcdet.config.cluster import load_cluster_config
from hpcdet.doctor import Finding, Options, diagnose, drill, failed
from hpcdet.errors import HpcdetError
from hpcdet.paths import StatePaths
from hpcdet.private import open_private, private_dir
from hpcdet.protocol.messages import Created, Kill
from hpcdet.schedulers.runner import CommandRunner
from hpcdet.states import FINAL_EXPERIMENT_STATES, RunState
from hpcdet.views.access import away, read_store
from hpcdet.views.experiments import describe_experiment
from hpcdet.views.trials import trial_metrics

POLL = 0.5
AWAY_POLL = 2.0


class DaemonLink(Protocol):
    """What the drill asks of the daemon: ``hpcdet.link.Client``, which the caller connects
    (the views sit beside the link, not above it)."""

    def create(self, config: dict[str, Any], context: Path) -> Created: ...

    def send(self, request: Kill) -> str: ...


def doctor_findings(paths: StatePaths, quick: bool, timeout: float, pool: str | None = None,
                    storage: Path | None = None, link: DaemonLink | None = None,
                    drill_timeout: float = drill.DEFAULT_TIMEOUT) -> list[Finding]:
    """``link``: run the preemption drill through it."""
    def run_drill(preempt: Callable[[str], list[str]], chosen: str | None,
                  runner: CommandRunner) -> Finding:
        assert link is not None
        return preemption_drill(paths, link, preempt, chosen, storage, drill_timeout, runner)

    return diagnose(load_cluster_config(), paths, Options(
        quick, timeout, pool, storage, run_drill if link is not None else None))


def any_failed(findings: list[Finding]) -> bool:
    """Whether a check failed: `hpcdet doctor` exits 1."""
    return failed(findings)


def preemption_drill(paths: StatePaths, link: DaemonLink, preempt: Callable[[str], list[str]],
                     pool: str | None, storage: Path | None, seconds: float,
                     runner: CommandRunner) -> Finding:
    """A one-trial experiment sent what the site's preemption sends (the command ``preempt``
    of the job builds) after its first checkpoint: it must stop as preempted, be resubmitted
    and resume from that checkpoint."""
    from hpcdet.config import load_experiment_config

    work = private_dir(paths.root / "doctor" / f"drill-{uuid.uuid4().hex[:12]}")
    _write(work / drill.SCRIPT, drill.trial_script())
    config = drill.config_yaml(pool, storage)
    _write(work / "drill.yaml", config)  # kept with the script for a look when it failed
    try:
        exp_id = link.create(load_experiment_config(config).raw, work).experiment_id
    except HpcdetError as e:
        return drill.judge(drill.Seen(None, created_error=str(e)))
    deadline = time.monotonic() + seconds
    watch = _Watch(paths, exp_id, seconds)
    # The signal goes to the job that runs the trial now (an earlier one may have checkpointed
    # and ended for the site's own reasons).
    seen = watch.until(deadline, lambda s: bool(
        s.checkpoint_step is not None and watch.running or s.state))
    if seen.checkpoint_step is not None and watch.running and not seen.state:
        job = watch.running
        cmd = preempt(job)
        error = _send(runner, cmd)
        watch.sent, watch.signal_error, watch.job = " ".join(cmd), error, job
        seen = watch.until(deadline, lambda s: bool(s.state) or bool(error))
    if not seen.state:
        try:
            link.send(Kill(exp_id))
        except HpcdetError:
            pass  # the finding says it was killed; the user's `experiment kill` says more
    finding = drill.judge(seen)
    if not failed([finding]):
        shutil.rmtree(work, ignore_errors=True)
    return finding


def _write(path: Path, text: str) -> None:
    fd = open_private(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _send(runner: CommandRunner, cmd: list[str]) -> str:
    try:
        result = runner.run(cmd, check=False)
    except HpcdetError as e:
        return str(e)
    if result.exit_code == 0:
        return ""
    said = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()[-1]
    return f"exited {result.exit_code}: {said}"


class _Watch:
    """The drill's experiment as the store has it, read every POLL seconds."""

    def __init__(self, paths: StatePaths, exp_id: int, seconds: float) -> None:
        # A daemon on another host answers with a copy of its database as it is then: asked
        # for a new one at each look, less often than a database here is read.
        self.paths, self.away = paths, away(paths)
        self.store = read_store(paths)
        self.exp_id, self.seconds = exp_id, seconds
        self.checkpoint_step: int | None = None
        self.sent = self.signal_error = self.job = ""
        self.running = ""  # the job of the run that has started and not ended, if any

    def until(self, deadline: float, done: Callable[[drill.Seen], bool]) -> drill.Seen:
        seen = self.look()
        while not done(seen) and time.monotonic() < deadline:
            time.sleep(AWAY_POLL if self.away else POLL)
            seen = self.look()
        return seen

    def look(self) -> drill.Seen:
        if self.away:
            self.store = read_store(self.paths)
        view = describe_experiment(self.store, self.exp_id)
        state = view.experiment.state
        trial = view.trials[0].trial if view.trials else None
        if self.checkpoint_step is None and trial is not None and trial.latest_checkpoint:
            self.checkpoint_step = trial.steps_completed
        # Each run's first training report: whether it resumed; a run that reported and
        # has not ended is the one running the trial now.
        first: dict[int, int] = {}
        if trial is not None and view.runs:
            for row in trial_metrics(self.store, trial.id, "training").rows:
                first.setdefault(row.run_id, int(row.metrics.get("resumed_from", 0)))
        runs = tuple(drill.RunSeen(r.job_id, r.outcome if r.ended is not None else "",
                                   first.get(r.run_id)) for r in view.runs)
        last = view.runs[-1] if view.runs else None
        self.running = (last.job_id if last is not None and last.ended is None and (
            last.state is RunState.RUNNING or last.run_id in first) else "")
        return drill.Seen(
            self.exp_id, checkpoint_step=self.checkpoint_step, signal=self.sent,
            signaled_job=self.job,
            signal_error=self.signal_error,
            state=state.value if state in FINAL_EXPERIMENT_STATES else "",
            restarts=trial.restarts if trial else 0, runs=runs, seconds=self.seconds)


__all__ = ["DaemonLink", "any_failed", "doctor_findings", "preemption_drill"]
