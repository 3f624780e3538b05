"""A daemon killed around a submission: the next one adopts what reached Slurm and submits
what did not, exactly once. (tests/cluster kills a real daemon at random instants; these hit
the narrow windows on purpose.)"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.journal import Journal
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
                yield f"{task}|PENDING|Priority|(null)|1000|0|debug|N/A|{workdir}|{name}\n"

    def sbatches(self) -> list[str]:
        return [name for _, name, _, _ in self.jobs]


def _directive(script: str, key: str) -> str:
    found = re.search(rf"^#SBATCH --{key}=(\S+)$", script, re.M)
    assert found, key
    return found.group(1).strip("'")


def _create_search(root: Path, runner: FakeSlurm) -> None:
    daemon = Daemon(StatePaths(root), ClusterConfig(backend="slurm"), runner)
    staging = root / "staging"
    staging.mkdir()
    config: dict[str, Any] = {
        "name": "search", "entrypoint": "python3 train.py", "max_restarts": 0,
        "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 1.0}},
        "searcher": {"name": "random", "metric": "loss", "max_trials": 4,
                     "max_concurrent_trials": 2, "max_length": 1},
    }
    daemon.op_create(config, str(staging))


def _restart(root: Path, runner: FakeSlurm) -> Daemon:
    daemon = Daemon(StatePaths(root), ClusterConfig(backend="slurm"), runner)
    daemon.reconcile()
    daemon.tick()
    return daemon


def _first_runs(daemon: Daemon) -> dict[int, tuple[str, str]]:
    """Trial id: (state, job id) of each trial's first run."""
    return {r.trial_id: (r.state, r.job_id) for r in daemon.store.runs() if r.run_id == 1}


def test_an_array_submitted_just_before_the_kill_is_adopted(tmp_path: Path) -> None:
    runner = FakeSlurm()
    runner.kill_after_sbatch = True
    with pytest.raises(Killed):
        _create_search(tmp_path, runner)
    daemon = _restart(tmp_path, runner)
    assert runner.sbatches() == ["hpcdet-e1-array0"]  # not submitted twice
    assert [(a.job_id, a.offset, a.count) for a in daemon.store.arrays(1)] == [("500", 0, 4)]
    # max_concurrent_trials 2: the search has created two trials so far.
    assert _first_runs(daemon) == {1: ("PENDING", "500_0"), 2: ("PENDING", "500_1")}


def test_an_array_the_scheduler_never_got_is_submitted(tmp_path: Path) -> None:
    runner = FakeSlurm()
    runner.kill_after_sbatch = True
    with pytest.raises(Killed):
        _create_search(tmp_path, runner)
    runner.jobs.clear()  # sbatch never reached slurmctld
    daemon = _restart(tmp_path, runner)
    assert runner.sbatches() == ["hpcdet-e1-array0"]
    assert [(a.job_id, a.count) for a in daemon.store.arrays(1)] == [("500", 4)]
    assert _first_runs(daemon)[1] == ("PENDING", "500_0")


def test_another_state_directory_s_array_of_the_same_name_is_not_adopted(
    tmp_path: Path,
) -> None:
    other = FakeSlurm()
    _create_search(tmp_path / "other", other)
    runner = FakeSlurm()
    runner.kill_after_sbatch = True
    with pytest.raises(Killed):
        _create_search(tmp_path / "mine", runner)
    runner.jobs = other.jobs  # the same user's queue: only the other directory's array
    daemon = _restart(tmp_path / "mine", runner)
    assert runner.sbatches() == ["hpcdet-e1-array0", "hpcdet-e1-array0"]
    assert [a.job_id for a in daemon.store.arrays(1)] == ["501"]


@pytest.mark.parametrize("slot_written", [False, True])
def test_a_trial_handed_to_its_array_task_when_killed_stays_in_the_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slot_written: bool
) -> None:
    """Killed between journaling a trial's first run and journaling its array task's id: the
    slot file may or may not name the run yet. The run stays in its task (a second run as a
    single job would leave the task waiting for ever and could run the trial twice)."""
    slot = tmp_path / "runs" / "exp-1" / "array" / "slot-1"  # trial 2 runs request 1
    if slot_written:
        record = Journal.record

        def killed_journaling(self: Journal, exp_id: int, kind: str, **body: Any) -> None:
            if kind == "run_submitted" and body.get("trial_id") == 2:
                raise Killed
            record(self, exp_id, kind, **body)

        monkeypatch.setattr(Journal, "record", killed_journaling)
    else:
        replace = os.replace

        def killed_writing(src: Any, dst: Any) -> None:
            if Path(dst) == slot:
                raise Killed
            replace(src, dst)

        monkeypatch.setattr(os, "replace", killed_writing)
    runner = FakeSlurm()
    with pytest.raises(Killed):
        _create_search(tmp_path, runner)
    assert slot.exists() is slot_written
    monkeypatch.undo()
    daemon = _restart(tmp_path, runner)
    assert runner.sbatches() == ["hpcdet-e1-array0"]
    run_dir = StatePaths(tmp_path).run(1, 2, 1)
    assert slot.read_text() == str(run_dir)
    assert _first_runs(daemon)[2] == ("PENDING", "500_1")
    assert [r.run_id for r in daemon.store.runs() if r.trial_id == 2] == [1]

