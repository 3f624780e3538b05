"""A daemon killed around a submission: the next one adopts what reached Slurm and submits
what did not, exactly once. (tests/cluster kills a real daemon at random instants; these hit
the narrow windows on purpose.)"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.service import Daemon
from hpcdet.paths import StatePaths
from tests.unit.daemon.fake_slurm import FakeSlurm, Killed, create_search


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
        create_search(tmp_path, runner)
    daemon = _restart(tmp_path, runner)
    assert runner.sbatches() == ["hpcdet-e1-array0"]  # not submitted twice
    assert [(a.job_id, a.offset, a.count) for a in daemon.store.arrays(1)] == [("500", 0, 4)]
    # max_concurrent_trials 2: the search has created two trials so far.
    assert _first_runs(daemon) == {1: ("PENDING", "500_0"), 2: ("PENDING", "500_1")}


def test_an_array_the_scheduler_never_got_is_submitted(tmp_path: Path) -> None:
    runner = FakeSlurm()
    runner.kill_after_sbatch = True
    with pytest.raises(Killed):
        create_search(tmp_path, runner)
    runner.jobs.clear()  # sbatch never reached slurmctld
    daemon = _restart(tmp_path, runner)
    assert runner.sbatches() == ["hpcdet-e1-array0"]
    assert [(a.job_id, a.count) for a in daemon.store.arrays(1)] == [("500", 4)]
    assert _first_runs(daemon)[1] == ("PENDING", "500_0")


def test_another_state_directory_s_array_of_the_same_name_is_not_adopted(
    tmp_path: Path,
) -> None:
    other = FakeSlurm()
    create_search(tmp_path / "other", other)
    runner = FakeSlurm()
    runner.kill_after_sbatch = True
    with pytest.raises(Killed):
        create_search(tmp_path / "mine", runner)
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
        create_search(tmp_path, runner)
    assert slot.exists() is slot_written
    monkeypatch.undo()
    daemon = _restart(tmp_path, runner)
    assert runner.sbatches() == ["hpcdet-e1-array0"]
    run_dir = StatePaths(tmp_path).run(1, 2, 1)
    assert slot.read_text() == str(run_dir)
    assert _first_runs(daemon)[2] == ("PENDING", "500_1")
    assert [r.run_id for r in daemon.store.runs() if r.trial_id == 2] == [1]

