"""A tiny experiment's slot-hours on the real Slurm cluster, with where the figure came from:
sacct's ElapsedRaw, for the test cluster keeps accounting (slurmdbd). The run tree's times,
where a cluster keeps none, are tested on the local backend (tests/integration/
test_usage_local.py)."""

from __future__ import annotations

from pathlib import Path

from tests.support import Hpcdet

TRIAL = """
import time
import determined as det
with det.core.init() as core_context:
    time.sleep(1)
    core_context.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
"""


def test_the_slot_hours_of_a_tiny_experiment(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    h = slurm_hpcdet
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text(TRIAL)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("name: tiny\nentrypoint: python3 train.py\n"
                   "searcher: {name: single, metric: loss, max_length: 1}\n"
                   "resources: {slots_per_trial: 0}\nmax_restarts: 0\n")
    exp = h.create(cfg, ctx)
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=120)
    assert d["experiment"]["state"] == "COMPLETED", h.run("t", "logs", "1").stdout
    [run] = d["runs"]
    used = d["usage"]
    assert used["unit"] == "slot-hours" and used["running"] == 0
    assert (used["sources"], run["usage_by"]) == (["sacct"], "sacct")
    assert run["used_seconds"] >= 1 and run["used_cpus"] >= 1
    # From its first node's start to its end: the sleep, less than the whole job.
    assert 1.0 <= used["hours"] * 3600 <= run["ended"] - run["submitted"] + 1, (used, run)
    assert run["submitted"] <= run["started"] <= run["ended"]
    text = h.run("experiment", "describe", str(exp)).stdout
    assert f"used: {used['hours']:.2f} slot-hours ({used['sources'][0]})" in text, text
