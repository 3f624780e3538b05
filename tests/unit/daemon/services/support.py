"""What a daemon service is built with in its tests: a real store and journal in a temporary
directory, the real Slurm backend building commands and parsing output, and a scripted runner
that answers those commands with literal Slurm output and records what was run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.configs import Configs
from hpcdet.daemon.finishing import Finisher
from hpcdet.daemon.guard import Guard
from hpcdet.daemon.jobs import Jobs
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.retention import Retention
from hpcdet.daemon.searching import SearchDriver
from hpcdet.daemon.site import Site
from hpcdet.errors import SchedulerCommandError
from hpcdet.paths import StatePaths
from hpcdet.rundir.event_writer import EventWriter
from hpcdet.schedulers import make_scheduler
from hpcdet.schedulers.runner import CommandRunner, Result
from hpcdet.store.entries import ExperimentCreated, RunSubmitted, RunSubmitting, TrialCreated
from hpcdet.store.repository import Store

CONFIG: dict[str, Any] = {
    "name": "x", "entrypoint": "true", "max_restarts": 1,
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
}


def squeue_line(job_id: str, state: str = "PENDING", reason: str = "Priority",
                name: str = "hpcdet-e1-t1-r1", workdir: str = "/tmp", partition: str = "debug",
                priority: int = 1000, nice: int = 0) -> str:
    return f"{job_id}|{state}|{reason}|(null)|{priority}|{nice}|{partition}|N/A|{workdir}|{name}"


class ScriptedSlurm(CommandRunner):
    """Answers each Slurm command by its name; ``refuse`` makes a command fail."""

    def __init__(self) -> None:
        super().__init__()
        self.squeue: list[str] = []
        self.sacct = ""
        self.sinfo = "debug*|2|4|(null)\n"
        self.config = "MaxArraySize = 1001\nAccountingStorageType = accounting_storage/none\n"
        self.next_job = 100
        self.refuse: set[str] = set()
        self.refusal = "error: refused"  # what a refused command prints, after its name
        self.ran: list[list[str]] = []

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        cmd = list(cmd)
        self.ran.append(cmd)
        if cmd[0] in self.refuse:
            raise SchedulerCommandError(cmd, 1, "", f"{cmd[0]}: {self.refusal}")
        if cmd[0] == "squeue":
            return Result("".join(line + "\n" for line in self.squeue), "", 0)
        if cmd[0] == "sacct":
            return Result(self.sacct, "", 0)
        if cmd[0] == "sinfo":
            return Result(self.sinfo, "", 0)
        if cmd[:3] == ["scontrol", "show", "config"]:
            return Result(self.config, "", 0)
        if cmd[0] == "sbatch":
            self.next_job += 1
            return Result(f"{self.next_job}\n", "", 0)
        return Result("", "", 0)

    def commands(self, name: str) -> list[list[str]]:
        return [c for c in self.ran if c[0] == name]


class World:
    """The collaborators every service shares; each test builds the service it tests."""

    def __init__(self, root: Path, cluster: ClusterConfig | None = None) -> None:
        self.paths = StatePaths(root / "state")
        self.cluster = cluster or ClusterConfig(backend="slurm")
        self.store = Store(self.paths.database())
        self.journal = Journal(self.paths, self.store)
        self.runner = ScriptedSlurm()
        self.scheduler = make_scheduler("slurm", {})
        self.configs = Configs()
        self.search = SearchDriver(self.store, self.journal)

    def jobs(self) -> Jobs:
        return Jobs(self.scheduler, self.runner, self.store, poll_interval=5.0)

    def site(self) -> Site:
        return Site(self.scheduler, self.runner, self.cluster)

    def retention(self) -> Retention:
        return Retention(self.store, self.journal, self.configs, self.paths)

    def finisher(self, jobs: Jobs | None = None) -> Finisher:
        return Finisher(self.store, self.journal, jobs or self.jobs(), self.retention(),
                        self.paths)

    def guard(self, jobs: Jobs | None = None) -> Guard:
        jobs = jobs or self.jobs()
        return Guard(self.store, self.journal, self.search, jobs, self.finisher(jobs))

    # -------------------------------------------------------------- state, as the daemon makes it

    def experiment(self, exp_id: int = 1, **config: Any) -> None:
        merged = json.loads(json.dumps({**CONFIG, **config}))
        self.journal.record(exp_id, ExperimentCreated(name=f"e{exp_id}", config=merged,
                            backend="slurm", searcher=merged["searcher"]["name"]))

    def trial(self, exp_id: int, trial_id: int, request_id: int = 0) -> None:
        self.journal.record(exp_id, TrialCreated(trial_id=trial_id, hparams={},
                            trial_seed=0, request_id=request_id))

    def run(self, exp_id: int, trial_id: int, run_id: int = 1, job_id: str = "") -> Path:
        self.journal.record(exp_id, RunSubmitting(trial_id=trial_id, run_id=run_id))
        if job_id:
            self.journal.record(exp_id, RunSubmitted(trial_id=trial_id, run_id=run_id,
                                job_id=job_id))
        run_dir = self.paths.run(exp_id, trial_id, run_id)
        run_dir.mkdir(parents=True, exist_ok=True)
        return run_dir

    def report(self, run_dir: Path, *events: tuple[str, dict[str, Any]]) -> None:
        """Events as the trial writes them into its run directory."""
        writer = EventWriter(run_dir / "events.jsonl")
        for type_, body in events:
            writer.emit(type_, body)
        writer.close()


def one_run(tmp_path: Path, **config: Any) -> tuple[World, Path]:
    """Experiment 1 with trial 1 and its run 1, job 101; the run's directory."""
    w = World(tmp_path)
    w.experiment(1, **config)
    w.trial(1, 1)
    return w, w.run(1, 1, job_id="101")


def two_experiments(tmp_path: Path) -> World:
    """Experiment 1 with trial 1 and its run 1 (job 101), and experiment 2 with nothing."""
    w = World(tmp_path)
    w.experiment(1)
    w.trial(1, 1)
    w.run(1, 1, job_id="101")
    w.experiment(2)
    return w
