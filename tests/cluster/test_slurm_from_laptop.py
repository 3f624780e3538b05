"""`hpcdet -c x` from a laptop in front of the real two-node Slurm (issue 41): the login
node (a real sshd) is the cluster's submit host; the laptop's context goes up, the trial runs
on a compute node, its logs and its checkpoint come back."""

from __future__ import annotations

import csv
from pathlib import Path

from tests.remote_support import laptop_for
from tests.support import Hpcdet

TRIAL = """
import os, socket
import determined as det
with det.core.init() as core_context:
    print("on", os.environ.get("SLURMD_NODENAME"), socket.gethostname(), flush=True)
    core_context.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.5})
    with core_context.checkpoint.store_path({"steps_completed": 1}) as (path, _):
        (path / "weights").write_text("w")
"""


def test_a_laptop_drives_the_slurm_cluster(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    h = slurm_hpcdet
    code = tmp_path / "laptop-code"
    code.mkdir()
    (code / "train.py").write_text(TRIAL)
    (code / ".detignore").write_text("*.bin\n")
    (code / "data.bin").write_bytes(b"0" * 1_000_000)
    cfg = tmp_path / "const.yaml"
    cfg.write_text("name: far\nentrypoint: python3 train.py\n"
                   "searcher: {name: single, metric: loss, max_length: 1}\n"
                   "resources: {slots_per_trial: 0}\nmax_restarts: 0\n")
    with laptop_for(h, tmp_path) as lap:
        created = lap.run("-c", "x", "e", "create", str(cfg), str(code))
        assert created.returncode == 0, created.stderr
        assert created.stdout.splitlines()[-1] == "Created experiment 1"
        waited = lap.run("-c", "x", "e", "wait", "1", timeout=300)
        assert waited.returncode == 0, waited.stderr + h.run("t", "logs", "1").stdout
        logs = lap.run("-c", "x", "t", "logs", "1")
        assert "on node" in logs.stdout, logs.stdout
        assert not (h.state / "runs" / "exp-1" / "context" / "data.bin").exists()
        listed = lap.run("-c", "x", "e", "lc", "1", "--csv")
        uuid = next(csv.DictReader(listed.stdout.splitlines()))["UUID"]
        got = lap.run("-c", "x", "c", "download", uuid, "-o", str(tmp_path / "best"))
        assert got.returncode == 0, got.stderr
        assert (tmp_path / "best" / "weights").read_text() == "w"
