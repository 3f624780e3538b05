"""The PyTorch API on the two-node Slurm: the digits trial class on one slot and on 4 slots
over 2 nodes (legacy entrypoint and the launcher's --trial), the Trainer, and ASHA in one
job array."""

from __future__ import annotations

import json
from pathlib import Path

from tests import pytorch_scenarios
from tests.support import Hpcdet, require_modules

DISTRIBUTED = (pytorch_scenarios.DIGITS / "distributed.yaml").read_text()


def test_digits_on_one_slot(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    require_modules("torch", "sklearn")
    pytorch_scenarios.trained(slurm_hpcdet, tmp_path, "const.yaml")


def test_digits_on_four_slots_over_two_nodes(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    require_modules("torch", "sklearn")
    pytorch_scenarios.trained(slurm_hpcdet, tmp_path, "distributed.yaml", slots=4)


def test_digits_through_the_launchers_trial_option(slurm_hpcdet: Hpcdet, tmp_path: Path
                                                    ) -> None:
    require_modules("torch", "sklearn")
    text = DISTRIBUTED.replace(
        "entrypoint: model_def:DigitsTrial",
        "entrypoint: python3 -m determined.launch.torch_distributed -- --trial "
        "model_def:DigitsTrial")
    assert "--trial" in text
    pytorch_scenarios.trained(slurm_hpcdet, tmp_path, "distributed.yaml", slots=4, text=text)


def test_digits_with_the_trainer(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    require_modules("torch", "sklearn")
    pytorch_scenarios.trained(slurm_hpcdet, tmp_path, "trainer.yaml")


def test_digits_adaptive_asha_in_one_array(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    require_modules("torch", "sklearn")
    h = slurm_hpcdet
    ctx = pytorch_scenarios.copy_digits(tmp_path / "ctx")
    exp = h.create(ctx / "adaptive.yaml", ctx)
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=900)
    assert d["experiment"]["state"] == "COMPLETED", d
    assert len(d["trials"]) == 8
    jobs = {str(r["job_id"]).split("_")[0] for r in d["runs"]}
    assert len(jobs) == 1, d["runs"]  # every trial a task of one array
    for t in d["trials"]:
        val = pytorch_scenarios.validations(h, t["id"])
        assert val and all("batches" in v["metrics"] for v in val), (t, val)
    stopped = [t for t in d["trials"] if t["steps_completed"] < 320]
    assert stopped, d["trials"]  # ASHA stopped the trials it did not promote
    best = max(v["metrics"]["validation_accuracy"] for t in d["trials"]
               for v in pytorch_scenarios.validations(h, t["id"]))
    assert best >= 0.9, best
    assert json.dumps(d)  # describe is plain data


def test_a_paused_ddp_trial_resumes_where_it_stopped(slurm_hpcdet: Hpcdet, tmp_path: Path
                                                     ) -> None:
    require_modules("torch", "sklearn")
    # 4 slots over 2 nodes agree to stop at a report (scheduling_unit 5) or validation.
    paused_at = pytorch_scenarios.pause_resumes_bitwise(
        slurm_hpcdet, tmp_path, base="distributed.yaml", tolerance=1e-5)
    assert paused_at % 5 == 0, paused_at
