"""The real sbatch reads every directive of a script whose values carry quotes, spaces, '#',
'$(...)' and ';' (issue 9, item 3): each stays one quoted word on its own line, the job runs
no injected command, and the directives after --signal still apply."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from hpcdet.schedulers.base import JobRequest
from hpcdet.schedulers.slurm import SlurmScheduler


def _show(job_id: str) -> str:
    return subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True,
                          check=True, timeout=60).stdout


def test_hostile_but_allowed_values_keep_every_directive(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "owned"
    run_dir = tmp_path / f"it's a #dir; $(touch {marker})"
    run_dir.mkdir(parents=True)
    harness = tmp_path / "harness"  # stands in for python -m hpcdet.launch.harness RUN_DIR
    # Called as: python -I -m hpcdet.launch.harness RUN_DIR (the run directory comes last)
    harness.write_text('#!/bin/sh\nfor last; do :; done\ntouch "$last/harness-ran"\n')
    harness.chmod(0o755)
    comment = f"a'b\"c;$(touch {marker})#d `touch {marker}`"
    script = tmp_path / "job.sh"
    script.write_text(SlurmScheduler().render_script(JobRequest(
        name="hpcdet-e1-t1-r1", run_dir=run_dir, python=str(harness), walltime_seconds=300,
        nice=7, extra_args=[f"--comment={comment}", "--mem=100M"],
    )))
    job_id = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True,
                            text=True, check=True, timeout=60).stdout.strip().split(";")[0]
    try:
        shown = _show(job_id)
        deadline = time.time() + 120
        while not (run_dir / "exit.json").exists() and time.time() < deadline:
            time.sleep(0.5)
    finally:
        subprocess.run(["scancel", job_id], check=False, timeout=60)
    assert f"WorkDir={run_dir}\n" in shown, shown
    assert f"Comment={comment} " in shown, shown
    assert "MinMemoryNode=100M" in shown and "Nice=7" in shown, shown  # after --signal
    assert (run_dir / "harness-ran").exists()
    assert '"exit_code": 0' in (run_dir / "exit.json").read_text()
    assert not marker.exists()
