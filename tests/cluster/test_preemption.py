"""A real Slurm preemption: on the test cluster a job in `urgent` (PriorityTier=10) preempts
the jobs of `preemptible` (PreemptType=preempt/partition_prio, PreemptMode=REQUEUE,
GraceTime=30). Slurm sends the job's steps SIGTERM at once and cancels the job GraceTime
later; the trial, told by that SIGTERM, must checkpoint and stop as preempted, and the daemon
must resume it from that checkpoint. Before, the trial died of the SIGTERM (143).

The preemption drill of `hpcdet doctor` does the work (hpcdet.views.doctor), with a job in
`urgent` that needs both nodes whole as its signal: it runs alone (`exclusive`), else other
tests' jobs would keep the urgent job from starting and so from preempting. About 20 s."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.cluster.conftest import SlurmTestCluster
from tests.support import Hpcdet, slurm_jobs_under

pytestmark = pytest.mark.exclusive

_DRILL = """
import json, sys
from hpcdet.link import connect
from hpcdet.paths import StatePaths, state_dir
from hpcdet.schedulers.runner import CommandRunner
from hpcdet.views.doctor import preemption_drill
p = StatePaths(state_dir())
urgent = ["sbatch", "--partition=urgent", "--nodes=2", "--cpus-per-task=4", "--output=/dev/null",
          "--job-name=hpcdet-test-urgent", "--wrap=sleep 2"]
found = preemption_drill(p, connect(p), lambda job: urgent, "preemptible", None,
                         float(sys.argv[1]), CommandRunner(timeout=30))
print(json.dumps(found.as_json()))
"""


def test_a_preempted_trial_checkpoints_on_sigterm_and_resumes(
        slurm_cluster: SlurmTestCluster, tmp_path: Path) -> None:
    h = Hpcdet(tmp_path / "user", "slurm")
    try:
        p = subprocess.run([*h.wrap, h.python, "-c", _DRILL, "120"], env=h.env(),
                           capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stderr
        drill = json.loads(p.stdout)
        assert drill["status"] == "ok", drill
        seen = re.search(r"`sbatch --partition=urgent .*`: job (\d+) checkpointed and stopped "
                         r"\(preempted\), job \d+ resumed from step \d+ and completed",
                         drill["seen"])
        assert seen, drill
        # Slurm's own SIGTERM told it; it checkpointed and exited before GraceTime was up, so
        # Slurm lists the job COMPLETED, not PREEMPTED.
        [log] = (h.state / "runs").glob("exp-1/trials/*/run-1/logs/node-0.log")
        assert "[hpcdet] SIGTERM: the job is ending; asking the trial to checkpoint" in (
            log.read_text())
    finally:
        h.stop()
        left = slurm_jobs_under(h.root)
        if left:
            subprocess.run(["scancel", *sorted(left)], check=False, capture_output=True)
