"""A daemon killed around a submission, on the real Slurm: the next daemon adopts what reached
Slurm and submits what did not, exactly once.

test_slurm_search kills a daemon process at arbitrary instants; these tests hit the narrow
windows on purpose. They drive the daemon in-process, through a runner that runs the real
commands and then stops the daemon dead right after (or instead of) an sbatch.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon import journal
from hpcdet.daemon.loop import Daemon
from hpcdet.paths import StatePaths
from hpcdet.schedulers import JobState
from hpcdet.schedulers.runner import CommandRunner, Result
from hpcdet.search import TrialExited
from hpcdet.search.base import EXIT_INVALID_HP
from tests.support import Hpcdet, slurm_jobs_under


class Killed(BaseException):
    """SIGKILL, as far as the daemon's code can tell: nothing after it runs."""


class KillingRunner(CommandRunner):
    """Runs the real commands; ``kill`` = "after" or "before" the next real sbatch."""

    def __init__(self) -> None:
        super().__init__()
        self.kill = ""
        self.submitted: list[str] = []  # job ids sbatch answered

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        submits = cmd[0] == "sbatch" and "--test-only" not in cmd
        if submits and self.kill == "before":
            self.kill = ""
            raise Killed
        result = super().run(cmd, check, stdin)
        if submits:
            self.submitted.append(result.stdout.strip().split(";")[0])
            if self.kill == "after":
                self.kill = ""
                raise Killed
        return result


def _create_search(h: Hpcdet, runner: KillingRunner, max_trials: int = 4) -> Daemon:
    daemon = Daemon(StatePaths(h.state), ClusterConfig(backend="slurm"), runner)
    staging = h.root / "staging"
    staging.mkdir()
    config: dict[str, Any] = {
        "name": "search", "entrypoint": "sleep 60", "max_restarts": 0,
        "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 1.0}},
        "searcher": {"name": "random", "metric": "loss", "max_trials": max_trials,
                     "max_concurrent_trials": 2, "max_length": 1},
    }
    daemon.creation.create(config, str(staging))
    return daemon


def _restart(h: Hpcdet, runner: KillingRunner) -> Daemon:
    daemon = Daemon(StatePaths(h.state), ClusterConfig(backend="slurm"), runner)
    daemon.reconcile()
    daemon.tick()
    return daemon


def _first_runs(daemon: Daemon) -> dict[int, str]:
    """Trial id: job id of each trial's first run."""
    return {r.trial_id: r.job_id for r in daemon.store.runs() if r.run_id == 1}


def test_an_array_submitted_just_before_the_kill_is_adopted(slurm_hpcdet: Hpcdet) -> None:
    runner = KillingRunner()
    runner.kill = "after"
    with pytest.raises(Killed):
        _create_search(slurm_hpcdet, runner)
    [job_id] = runner.submitted
    daemon = _restart(slurm_hpcdet, runner)
    assert runner.submitted == [job_id]  # not submitted twice
    assert slurm_jobs_under(slurm_hpcdet.state) == {job_id}
    assert [(a.job_id, a.offset, a.count) for a in daemon.store.arrays(1)] == [(job_id, 0, 4)]
    # max_concurrent_trials 2: the search has created two trials so far.
    assert _first_runs(daemon) == {1: f"{job_id}_0", 2: f"{job_id}_1"}


def test_an_array_sbatch_never_got_is_submitted(slurm_hpcdet: Hpcdet) -> None:
    runner = KillingRunner()
    runner.kill = "before"
    with pytest.raises(Killed):
        _create_search(slurm_hpcdet, runner)
    daemon = _restart(slurm_hpcdet, runner)
    [job_id] = runner.submitted
    assert [(a.job_id, a.count) for a in daemon.store.arrays(1)] == [(job_id, 4)]
    assert _first_runs(daemon)[1] == f"{job_id}_0"


def test_another_state_directory_s_array_of_the_same_name_is_not_adopted(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    other, mine = Hpcdet(tmp_path / "other", "slurm"), Hpcdet(tmp_path / "mine", "slurm")
    _create_search(other, KillingRunner())  # hpcdet-e1-array0, in the other directory
    runner = KillingRunner()
    runner.kill = "before"
    with pytest.raises(Killed):
        _create_search(mine, runner)
    try:
        daemon = _restart(mine, runner)
        [job_id] = runner.submitted
        assert [a.job_id for a in daemon.store.arrays(1)] == [job_id]
        assert slurm_jobs_under(mine.state) == {job_id}
    finally:
        subprocess.run(["scancel", *slurm_jobs_under(other.state), *slurm_jobs_under(mine.state)],
                       check=False, timeout=60)


@pytest.mark.parametrize("slot_written", [False, True])
def test_a_trial_handed_to_its_array_task_when_killed_stays_in_the_array(
    slurm_hpcdet: Hpcdet, monkeypatch: pytest.MonkeyPatch, slot_written: bool
) -> None:
    """Killed between journaling a trial's first run and journaling its array task's id: the
    slot file may or may not name the run yet. The run stays in its task (a second run as a
    single job would leave the task waiting for ever and could run the trial twice)."""
    slot = slurm_hpcdet.state / "runs" / "exp-1" / "array" / "slot-1"  # trial 2's request
    if slot_written:
        append = journal.append_lines

        def killed_journaling(path: Path, lines: Sequence[dict[str, Any]]) -> int:
            # Entries journaled together: the crash leaves those before trial 2's.
            start = -1
            for line in lines:
                if line["kind"] == "run_submitted" and line.get("trial_id") == 2:
                    raise Killed
                at = append(path, [line])
                start = at if start < 0 else start
            return start

        monkeypatch.setattr(journal, "append_lines", killed_journaling)
    else:
        replace = os.replace

        def killed_writing(src: Any, dst: Any) -> None:
            if Path(dst) == slot:
                raise Killed
            replace(src, dst)

        monkeypatch.setattr(os, "replace", killed_writing)
    runner = KillingRunner()
    with pytest.raises(Killed):
        _create_search(slurm_hpcdet, runner)
    assert slot.exists() is slot_written
    monkeypatch.undo()
    daemon = _restart(slurm_hpcdet, runner)
    [job_id] = runner.submitted
    assert slot.read_text() == str(StatePaths(slurm_hpcdet.state).run(1, 2, 1))
    assert _first_runs(daemon)[2] == f"{job_id}_1"
    assert [r.run_id for r in daemon.store.runs() if r.trial_id == 2] == [1]


def test_a_replacement_for_invalid_hyperparameters_gets_an_array_task(
    slurm_hpcdet: Hpcdet,
) -> None:
    """Random search replaces a trial that exits with InvalidHP without counting it against
    max_trials: the replacement's request lies past the array planned for max_trials."""
    runner = KillingRunner()
    daemon = _create_search(slurm_hpcdet, runner, max_trials=2)
    [first] = runner.submitted
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the next array waits until no task of this one does
        daemon.jobs.poll()
        tasks = [s for j, s in daemon.jobs.statuses.items() if j.startswith(f"{first}_")]
        if len(tasks) == 2 and all(s.state is JobState.RUNNING for s in tasks):
            break
        time.sleep(1)
    exp = daemon.store.experiment(1)
    daemon.search.feed(exp, daemon.configs.get(exp), TrialExited(0, EXIT_INVALID_HP), None)
    daemon.tick()
    [_, second] = runner.submitted
    assert [(a.job_id, a.offset, a.count) for a in daemon.store.arrays(1)] == [
        (first, 0, 2), (second, 2, 1)]
    replacement = next(t for t in daemon.store.trials(1) if t.request_id == 2)
    assert _first_runs(daemon)[replacement.id] == f"{second}_0"
