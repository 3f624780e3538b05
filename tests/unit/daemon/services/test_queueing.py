"""Queue: `job update` against a scripted Slurm: what it runs, and what it undoes when
Slurm refuses part of it. (The same paths run against the real cluster in tests/cluster.)"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from hpcdet.daemon.controls import Controls
from hpcdet.daemon.queueing import Queue
from hpcdet.errors import HpcdetError, SchedulerCommandError
from hpcdet.schedulers.runner import CommandRunner, Result
from hpcdet.store.entries import (
    ExperimentCreated,
    ExperimentQueueUpdated,
    RunSubmitted,
    RunSubmitting,
    TrialCreated,
)
from tests.unit.daemon.services.support import World


class ScriptedSlurm(CommandRunner):
    """Answers squeue with fixed jobs; refuses commands containing ``refuse``."""

    def __init__(self, squeue: str, refuse: str = "") -> None:
        super().__init__()
        self.squeue, self.refuse = squeue, refuse
        self.commands: list[str] = []

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        line = " ".join(cmd)
        if cmd[0] == "squeue":
            return Result(self.squeue, "", 0)
        if cmd[0] == "sinfo" or cmd[:2] == ["scontrol", "show"]:
            return Result("", "", 0)
        self.commands.append(line)
        if self.refuse and self.refuse in line and check:
            raise SchedulerCommandError(cmd, 1, "", "scontrol: error: Access/permission denied")
        return Result("", "", 0)


class _Built:
    """The queue and what it is built with; three experiments, each with one pending job."""

    def __init__(self, tmp: Path, runner: ScriptedSlurm) -> None:
        w = World(tmp)
        w.runner = runner
        self.store, self.journal, self.jobs = w.store, w.journal, w.jobs()
        site = w.site()
        controls = Controls(w.store, w.paths, w.configs, self.jobs, site, w.guard(self.jobs))
        self.queue = Queue(w.store, w.journal, w.paths, w.configs, self.jobs, site, controls)
        config = {"name": "x", "entrypoint": "true",
                  "searcher": {"name": "single", "metric": "x", "max_length": 1}}
        for exp_id, job_id in ((1, "101"), (2, "102"), (3, "103")):
            w.journal.record(exp_id, ExperimentCreated(name=f"e{exp_id}", config=config,
                             backend="slurm", searcher="single"))
            w.journal.record(exp_id, TrialCreated(trial_id=exp_id, hparams={},
                             trial_seed=0))
            w.journal.record(exp_id, RunSubmitting(trial_id=exp_id, run_id=1))
            w.journal.record(exp_id, RunSubmitted(trial_id=exp_id, run_id=1,
                             job_id=job_id))


def _pending(*jobs: tuple[str, int, int]) -> str:
    return "".join(f"{j}|PENDING|Priority|(null)|{q}|{n}|debug|N/A|/tmp|hpcdet-e{j[-1]}-t1-r1\n"
                   for j, q, n in jobs)


def test_ahead_of_sets_nice_on_the_jobs_passed(tmp_path: Path) -> None:
    runner = ScriptedSlurm(_pending(("101", 1000, 0), ("102", 1000, 0), ("103", 1000, 0)))
    built = _Built(tmp_path, runner)
    built.queue.update_jobs([{"job": 3, "field": "ahead_of", "value": 1}])
    # 3 first, then 1 and 2 just behind it (one nice step; 2 after 1 by job id).
    assert runner.commands == ["scontrol update jobid=101,102 nice=1"]
    exps = {e.id: e for e in built.store.experiments()}
    assert exps[3].position < exps[1].position < exps[2].position
    assert exps[3].priority == 42


def test_a_refused_nice_undoes_the_others_and_records_nothing(tmp_path: Path) -> None:
    runner = ScriptedSlurm(_pending(("101", 1000, 0), ("102", 1000, 0), ("103", 1000, 0)),
                           refuse="nice=300")
    built = _Built(tmp_path, runner)
    with pytest.raises(HpcdetError, match="Access/permission denied.*Nothing was changed"):
        built.queue.update_jobs([{"job": 3, "field": "priority", "value": 10},
                               {"job": 2, "field": "priority", "value": 45}])
    # 3 first (nice 0); 1 behind it (nice 1) was set, 2 (nice 300) refused: 1 is set back.
    assert runner.commands == ["scontrol update jobid=101 nice=1",
                               "scontrol update jobid=102 nice=300",
                               "scontrol update jobid=101 nice=0"]
    assert {e.priority for e in built.store.experiments()} == {None}


def test_a_refused_move_is_moved_back(tmp_path: Path) -> None:
    runner = ScriptedSlurm(_pending(("101", 1000, 0), ("102", 1000, 0)), refuse="nice=")
    built = _Built(tmp_path, runner)
    with pytest.raises(HpcdetError, match="Nothing was changed"):
        built.queue.update_jobs([{"job": 1, "field": "resource_pool", "value": "batch"},
                               {"job": 2, "field": "priority", "value": 50}])
    assert runner.commands == ["scontrol update jobid=101 partition=batch",
                               "scontrol update jobid=102 nice=800",
                               "scontrol update jobid=101 partition=debug"]
    assert {e.resource_pool for e in built.store.experiments()} == {""}


def test_a_nice_refused_in_the_background_is_not_asked_again(tmp_path: Path) -> None:
    runner = ScriptedSlurm(_pending(("101", 1000, 0), ("102", 1000, 0)), refuse="nice=1")
    built = _Built(tmp_path, runner)
    built.journal.record(2, ExperimentQueueUpdated(position=0.5))  # 2 ahead of 1
    for _ in range(3):  # the loop's polls: each is followed by putting the queue in order
        built.jobs.poll()
        built.queue.order()
    assert runner.commands == ["scontrol update jobid=101 nice=1"]
