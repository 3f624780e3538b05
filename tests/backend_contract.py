"""What every scheduler backend promises the daemon, run against each real one (psij-python's
``--executors``): the local backend and the PBS double in tests/integration, the real Slurm in
tests/cluster. Each check renders a batch script with the backend's own template, runs the
backend's commands through the one CommandRunner, and reads their output with its parsers; a
stand-in harness takes the run directory as its last argument, as the real one does."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hpcdet.schedulers.base import ArraySpec, JobRequest, JobStatus, Scheduler
from hpcdet.schedulers.runner import CommandRunner
from hpcdet.states import JobState


@dataclass
class Backend:
    scheduler: Scheduler
    runner: CommandRunner
    root: Path

    def submit(self, job: JobRequest) -> str:
        script = job.run_dir / f"{job.name}.sh"
        script.write_text(self.scheduler.render_script(job))
        return self.scheduler.parse_job_id(
            self.runner.run(self.scheduler.submit_command(script)).stdout)

    def statuses(self, job_ids: list[str]) -> dict[str, JobStatus]:
        cmd = self.scheduler.status_command(job_ids)
        result = self.runner.run(cmd, check=False)
        assert self.scheduler.answered(result.exit_code, result.stderr), result
        found = self.scheduler.parse_status(result.stdout)
        gone = [j for j in job_ids if j not in found]
        final = self.scheduler.final_status_command(gone)
        if final is not None:
            result = self.runner.run(final, check=False)
            if self.scheduler.answered(result.exit_code, result.stderr):
                found.update(self.scheduler.parse_final_status(result.stdout))
        return found

    def harness(self, body: str) -> str:
        """A stand-in for ``python -I -m hpcdet.launch.harness RUN_DIR``."""
        path = self.root / f"harness-{abs(hash(body))}"
        path.write_text(f'#!/bin/sh\nfor RUN_DIR; do :; done\n{body}\n')
        path.chmod(0o755)
        return str(path)


def _wait(what: str, predicate: Callable[[], bool], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _run_dir(b: Backend, name: str) -> Path:
    path = b.root / name
    path.mkdir(parents=True)
    return path


def a_job_runs_and_its_exit_is_recorded(b: Backend) -> None:
    run_dir = _run_dir(b, "one")
    python = b.harness('echo "$$" > "$RUN_DIR/ran"; exit 3')
    job_id = b.submit(JobRequest(name="hpcdet-e1-t1-r1", run_dir=run_dir, python=python))
    _wait("the job's exit.json", lambda: (run_dir / "exit.json").exists())
    ended = json.loads((run_dir / "exit.json").read_text())
    assert ended["exit_code"] == 3 and (run_dir / "ran").exists()
    assert job_id.startswith(ended["job_id"].split(".")[0].split("[")[0]) or not ended["job_id"]

    def final() -> bool:
        status = b.statuses([job_id]).get(job_id)
        return status is None or status.state.is_final
    _wait("the scheduler to count the job as ended", final)


def a_running_job_is_canceled(b: Backend) -> None:
    run_dir = _run_dir(b, "long")
    python = b.harness('touch "$RUN_DIR/started"; exec sleep 300')
    job_id = b.submit(JobRequest(name="hpcdet-e1-t2-r1", run_dir=run_dir, python=python))
    _wait("the job to start", lambda: (run_dir / "started").exists())
    assert b.statuses([job_id])[job_id].state == JobState.RUNNING
    b.runner.run(b.scheduler.cancel_command([job_id]))

    def ended() -> bool:
        status = b.statuses([job_id]).get(job_id)
        return status is None or status.state.is_final
    _wait("the canceled job to end", ended)


def an_array_runs_each_task_once_within_its_throttle(b: Backend) -> None:
    array_dir = _run_dir(b, "array")
    runs = [_run_dir(b, f"run-{k}") for k in range(3)]
    for k, run in enumerate(runs):
        (array_dir / f"slot-{k + 5}").write_text(str(run))
    python = b.harness('date +%s.%N > "$RUN_DIR/start"; sleep 1; date +%s.%N > "$RUN_DIR/end"')
    array_id = b.submit(JobRequest(name="hpcdet-e1-array0", run_dir=array_dir, python=python,
                                   array=ArraySpec(count=3, offset=5, throttle=1)))
    tasks = [b.scheduler.array_task_id(array_id, k) for k in range(3)]
    assert [b.scheduler.array_of(t) for t in tasks] == [b.scheduler.array_of(array_id)] * 3
    _wait("every task's exit.json", lambda: all((r / "exit.json").exists() for r in runs), 120)
    spans = sorted((float((r / "start").read_text()), float((r / "end").read_text()))
                   for r in runs)
    assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:])), spans
    assert all(json.loads((r / "exit.json").read_text())["exit_code"] == 0 for r in runs)


CONTRACT = [a_job_runs_and_its_exit_is_recorded, a_running_job_is_canceled,
            an_array_runs_each_task_once_within_its_throttle]
