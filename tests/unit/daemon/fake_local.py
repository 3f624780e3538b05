"""The local backend's batch system played by the test, with trials that follow the 0.37
operations protocol (hpcdet.core._searcher.ControlOps) one step per call of ``step()``.

Jobs outlive the daemon as real ones do: a test kills a daemon, starts another on the same
state directory with the same ``FakeLocal``, and the jobs go on. Every trial step is one
append to the run's event log, as the trial's event writer flushes it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon import journal
from hpcdet.daemon.loop import Daemon
from hpcdet.paths import StatePaths
from hpcdet.rundir.atomic import dumps, read_json, write_atomic
from hpcdet.rundir.layout import CONTROL_FILE, EVENTS_FILE, EXIT_FILE
from hpcdet.rundir.spec import RunSpec
from hpcdet.schedulers.local_exec import NAME_MARK
from hpcdet.schedulers.runner import CommandRunner, Result
from hpcdet.store.entries import ExperimentCreated, RunSubmitted, RunSubmitting, TrialCreated


class Killed(BaseException):
    """SIGKILL, as far as the daemon's code can tell: no handler runs, nothing after it."""


def kill_after(
    monkeypatch: pytest.MonkeyPatch, entries: Callable[[list[str]], bool]
) -> list[str]:
    """Journal appends raise Killed right after an entry for which ``entries(written so far)``
    holds, also amid the entries of one append (which then leaves only those before it, as a
    crash can); returns the list of the kinds written, in order."""
    written: list[str] = []
    append = journal.append_lines

    def append_then_maybe_die(path: Path, lines: list[dict[str, Any]]) -> int:
        start = -1
        for entry in lines:
            at = append(path, [entry])
            start = at if start < 0 else start
            written.append(entry["kind"])
            if entries(written):
                raise Killed
        return start

    monkeypatch.setattr(journal, "append_lines", append_then_maybe_die)
    return written


def loss(hparams: dict[str, Any], length: int) -> float:
    return round(float(hparams.get("lr", 0.5)) + 1 / length, 4)


@dataclass
class FakeJob:
    job_id: str
    run_dir: Path
    name: str
    state: str = "PENDING"
    exit_code: int | None = None
    given: int = 0  # operations this run has started
    seq: int = 0


@dataclass
class FakeLocal(CommandRunner):
    """``python -m hpcdet.schedulers.local_exec submit|status|cancel`` answered in memory."""

    jobs: dict[str, FakeJob] = field(default_factory=dict)
    # (trial id, group, steps completed) -> metrics, as the trials reported them
    reported: dict[tuple[int, str, int], dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__()

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        # hpcdet_command(...) + [verb, jobs_dir, *args]: the verb follows the module's argv.
        at = next(i for i, a in enumerate(cmd) if "hpcdet.schedulers.local_exec" in a) + 1
        verb, args = cmd[at], cmd[at + 2:]
        self.calls[verb] = self.calls.get(verb, 0) + 1
        if verb == "submit":
            script = Path(args[0])
            name = next((line[len(NAME_MARK):].strip() for line in script.read_text().splitlines()
                         if line.startswith(NAME_MARK)), "")
            job = FakeJob(str(len(self.jobs) + 1), script.parent, name)
            self.jobs[job.job_id] = job
            return Result(job.job_id + "\n", "", 0)
        if verb == "status":
            return Result("".join(
                f"{j.job_id}|{j.state}|{'' if j.exit_code is None else j.exit_code}|{j.name}\n"
                for j in self.jobs.values()), "", 0)
        if verb == "cancel":
            for job_id in args:
                job = self.jobs.get(job_id)
                if job is not None and job.state in ("PENDING", "RUNNING"):
                    job.state, job.exit_code = "CANCELLED", -15
            return Result("", "", 0)
        raise AssertionError(f"unexpected command {cmd}")

    def live(self) -> list[FakeJob]:
        return [j for j in self.jobs.values() if j.state in ("PENDING", "RUNNING")]

    def step(self) -> None:
        """Every live job does one thing: start, train one operation, or exit."""
        for job in self.live():
            if job.state == "PENDING":
                job.state = "RUNNING"
                (job.run_dir / "nodes").mkdir(exist_ok=True)  # as the harness does at start
                job.seq = _last_seq(job.run_dir / EVENTS_FILE)
            else:
                self._work(job)

    def _work(self, job: FakeJob) -> None:
        control = read_json(job.run_dir / CONTROL_FILE, {})
        if control.get("preempt"):  # a trial that checks should_preempt() between steps
            self.report(job, [("preempt_ack", {})])
            self.exit(job, 0)
        elif control.get("decided", 0) >= job.given:
            ops = control.get("ops", [])
            if job.given >= len(ops):
                self.exit(job, 0)
                return
            length = ops[job.given]
            job.given += 1
            spec = RunSpec.load(job.run_dir)
            metric = loss(spec.hparams, length)
            self.report(job, [
                ("metrics", {"group": "validation", "steps_completed": length,
                             "metrics": {"loss": metric}, "batch_metrics": None}),
                ("checkpoint", {"uuid": f"ck-{spec.trial_id}-{length}",
                                "steps_completed": length, "metadata": {}, "resources": {}}),
                ("searcher_completed", {"length": length, "metric": metric}),
            ])

    def report(self, job: FakeJob, events: list[tuple[str, dict[str, Any]]]) -> None:
        """Append events as one flush of the trial's event writer."""
        trial_id = RunSpec.load(job.run_dir).trial_id
        lines = []
        for type_, body in events:
            job.seq += 1
            lines.append(dumps({"seq": job.seq, "type": type_, "time": 1.0, **body}) + "\n")
            if type_ == "metrics":
                key = (trial_id, body["group"], body["steps_completed"])
                self.reported[key] = body["metrics"]
        with open(job.run_dir / EVENTS_FILE, "a") as f:
            f.write("".join(lines))

    def exit(self, job: FakeJob, code: int) -> None:
        write_atomic(job.run_dir / EXIT_FILE, {"exit_code": code, "job_id": job.job_id})
        job.state, job.exit_code = ("COMPLETED" if code == 0 else "FAILED"), code


def _last_seq(path: Path) -> int:
    try:
        return sum(1 for _ in path.open())
    except FileNotFoundError:
        return 0


def asha_config(**searcher: Any) -> dict[str, Any]:
    """A small adaptive ASHA search in 0.37 style (operations)."""
    return {
        "name": "asha", "entrypoint": "true", "max_restarts": 0,
        "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 1.0}},
        "reproducibility": {"experiment_seed": 3},
        "searcher": {"name": "adaptive_asha", "metric": "loss", "max_length": 4,
                     "max_trials": 3, "max_rungs": 2, "divisor": 2,
                     "max_concurrent_trials": 2, **searcher},
    }


def new_daemon(root: Path, cluster: FakeLocal, submissions_per_minute: int = 10**6) -> Daemon:
    daemon = Daemon(StatePaths(root), ClusterConfig(
        backend="local", submissions_per_minute=submissions_per_minute), cluster)
    daemon.jobs.poll_interval = 0.0  # every tick asks the fake scheduler: no waiting on the clock
    daemon.poll_share = math.inf  # however long the last poll took
    return daemon


def create(daemon: Daemon, config: dict[str, Any]) -> int:
    staging = daemon.paths.root / f"staging-{len(list(daemon.paths.root.glob('staging-*')))}"
    staging.mkdir(parents=True)
    reply = daemon.creation.create(json.loads(json.dumps(config)), str(staging))
    return int(reply["experiment_id"])


def drive(daemon: Daemon, cluster: FakeLocal, ticks: int = 40) -> None:
    """Tick until every experiment is final (or ``ticks`` run out)."""
    for _ in range(ticks):
        daemon.tick()
        if not daemon.store.experiments(unfinished=True):
            return
        cluster.step()


def stored_metrics(daemon: Daemon) -> dict[tuple[int, str, int], dict[str, Any]]:
    return {(m.trial_id, m.group, m.steps_completed): json.loads(m.metrics_json)
            for t in daemon.store.trials() for m in daemon.store.metrics(t.id)}


def journal_one_submitted_run(journal: Any) -> None:
    """Experiment 1 with trial 1 and its run 1 submitted as job 7, journaled by hand (for tests
    of how older or damaged journals replay)."""
    journal.record(1, ExperimentCreated(name="e", config=asha_config(), backend="local",
                   searcher="adaptive_asha"))
    journal.record(1, TrialCreated(trial_id=1, hparams={}, trial_seed=0))
    journal.record(1, RunSubmitting(trial_id=1, run_id=1))
    journal.record(1, RunSubmitted(trial_id=1, run_id=1, job_id="7"))
