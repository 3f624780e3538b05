"""A Slurm that keeps what sbatch was given and answers squeue about it, for daemon tests."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.service import Daemon
from hpcdet.paths import StatePaths
from hpcdet.schedulers.runner import CommandRunner, Result


class Killed(BaseException):
    """SIGKILL, as far as the daemon's code can tell: nothing after it runs."""


class FakeSlurm(CommandRunner):
    """Keeps the jobs sbatch was given and lists them the way `squeue --array` does."""

    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[tuple[str, str, str, int]] = []  # (id, name, workdir, array size)
        self.kill_after_sbatch = False
        self.state = "PENDING"  # of every job and array task

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None) -> Result:
        if cmd[0] == "sbatch":
            script = Path(cmd[-1]).read_text()
            size = re.search(r"--array=0-(\d+)", script)
            job_id = str(500 + len(self.jobs))
            self.jobs.append((job_id, _directive(script, "job-name"),
                              _directive(script, "chdir"), int(size.group(1)) + 1 if size else 0))
            if self.kill_after_sbatch:
                self.kill_after_sbatch = False
                raise Killed
            return Result(f"{job_id}\n", "", 0)
        if cmd[0] == "squeue":
            return Result("".join(self._squeue()), "", 0)
        return Result("", "", 0)

    def _squeue(self) -> Iterator[str]:
        for job_id, name, workdir, size in self.jobs:
            for task in [f"{job_id}_{k}" for k in range(size)] or [job_id]:
                yield f"{task}|{self.state}|Priority|(null)|1000|0|debug|N/A|{workdir}|{name}\n"

    def sbatches(self) -> list[str]:
        return [name for _, name, _, _ in self.jobs]


def _directive(script: str, key: str) -> str:
    found = re.search(rf"^#SBATCH --{key}=(\S+)$", script, re.M)
    assert found, key
    return found.group(1).strip("'")


def create_search(root: Path, runner: FakeSlurm, max_trials: int = 4) -> Daemon:
    daemon = Daemon(StatePaths(root), ClusterConfig(backend="slurm"), runner)
    staging = root / "staging"
    staging.mkdir()
    config: dict[str, Any] = {
        "name": "search", "entrypoint": "python3 train.py", "max_restarts": 0,
        "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 1.0}},
        "searcher": {"name": "random", "metric": "loss", "max_trials": max_trials,
                     "max_concurrent_trials": 2, "max_length": 1},
    }
    daemon.op_create(config, str(staging))
    return daemon
