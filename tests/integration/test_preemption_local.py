"""A preemption's or qdel's SIGTERM to every process of a job, as PBS sends it (the local
backend's jobs are process groups, as the PBS double's are), under torch_distributed: torchrun
stops its workers and fails of the signal, the workers take it as a request to checkpoint,
and the run must end as preempted and resume from that checkpoint (about 15 s)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.support import Hpcdet, require_modules

TRIAL = """
import pathlib, time
import determined as det
dist = det.core.DistributedContext.from_torch_distributed()
with det.core.init(distributed=dist) as core:
    start, latest = 0, core.info.latest_checkpoint
    if latest:
        with core.checkpoint.restore_path(latest) as path:
            start = int((pathlib.Path(path) / "step").read_text())
    for step in range(start + 1, start + 300):
        time.sleep(0.2)
        if dist.rank == 0:
            core.train.report_training_metrics(
                steps_completed=step, metrics={"loss": 1.0 / step, "resumed_from": start})
        stop = core.preempt.should_preempt()
        if (stop or step % 5 == 0) and dist.rank == 0:
            with core.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (path / "step").write_text(str(step))
        if stop or (latest and step == start + 3):
            break
"""


def test_a_torchrun_trial_sent_sigterm_checkpoints_and_resumes(local_hpcdet: Hpcdet,
                                                              tmp_path: Path) -> None:
    require_modules("torch")
    h = local_hpcdet
    ctx = h.mkdir(tmp_path / "ctx")
    (ctx / "train.py").write_text(TRIAL)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("name: torchrun-preempted\nmax_restarts: 0\n"
                   "entrypoint: python3 -m determined.launch.torch_distributed python3 train.py\n"
                   "resources: {slots_per_trial: 2}\n"
                   "searcher: {name: single, metric: loss, max_length: 1}\n")
    exp = h.create(cfg, ctx)
    h.wait_for("a first checkpoint", lambda: bool(h.describe(exp)["trials"]) and (
        h.describe(exp)["trials"][0]["latest_checkpoint"] is not None), timeout=120)
    [job] = (h.state / "local-jobs").glob("*.json")
    os.killpg(int(json.loads(job.read_text())["pgid"]), signal.SIGTERM)
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=120)
    assert d["experiment"]["state"] == "COMPLETED", d["runs"]
    assert [r["outcome"] for r in d["runs"]] == ["preempted", "COMPLETED"]
    resumed = [m["metrics"]["resumed_from"] for m in h.metrics(d["trials"][0]["id"])
               if m["group"] == "training" and m["run_id"] == 2]
    assert resumed and resumed[0] >= 5
    log = h.run("trial", "logs", str(d["trials"][0]["id"])).stdout
    assert "torchrun exited 1 of the SIGTERM it got; all 2 workers" in log
