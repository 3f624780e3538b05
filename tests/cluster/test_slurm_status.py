"""hpcdet's one squeue call, parsed, against the real squeue: what the daemon adopts jobs by."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from hpcdet.schedulers import JobState
from hpcdet.schedulers.slurm import SlurmScheduler


def test_squeue_names_each_array_task_with_its_working_directory(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    workdir = tmp_path / "runs | exp-1" / "array"  # a "|" in a directory does not shift fields
    workdir.mkdir(parents=True)
    submitted = subprocess.run(
        ["sbatch", "--parsable", "--job-name=hpcdet-e1-array0", "--array=0-2%1",
         f"--chdir={workdir}", "--output=/dev/null", "--wrap", "sleep 60"],
        capture_output=True, text=True, check=True, timeout=60,
    )
    job_id = submitted.stdout.strip().split(";")[0]
    scheduler = SlurmScheduler()
    try:
        listed = subprocess.run(scheduler.status_command([]), capture_output=True, text=True,
                                check=True, timeout=60)
        statuses = scheduler.parse_status(listed.stdout)
    finally:
        subprocess.run(["scancel", job_id], check=False, timeout=60)
    tasks = {k: v for k, v in statuses.items() if k.split("_")[0] == job_id}
    assert sorted(tasks) == [f"{job_id}_{k}" for k in range(3)], listed.stdout
    assert {(s.name, s.workdir) for s in tasks.values()} == {("hpcdet-e1-array0", str(workdir))}
    assert tasks[f"{job_id}_2"].state is JobState.PENDING
