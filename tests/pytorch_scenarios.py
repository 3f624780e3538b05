"""The PyTorch API on the digits example (examples/pytorch_digits): training to an accuracy,
the trial-class and Trainer entrypoints, ASHA, and pausing mid-run. Each scenario runs on
any backend; the tests choose local or Slurm."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.support import REPO, Hpcdet

DIGITS = REPO / "examples" / "pytorch_digits"


def copy_digits(ctx: Path) -> Path:
    shutil.copytree(DIGITS, ctx, ignore=shutil.ignore_patterns("__pycache__"))
    return ctx


def state_dict(h: Hpcdet, uuid: str) -> dict[str, Any]:
    import torch

    ckpt = h.state / "checkpoints" / uuid
    loaded = torch.load(ckpt / "state-dict.pth", weights_only=False)
    assert isinstance(loaded, dict)
    return loaded


def validations(h: Hpcdet, trial: int) -> list[dict[str, Any]]:
    return [r for r in h.metrics(trial) if r["group"] == "validation"]


def trained(h: Hpcdet, tmp: Path, config: str, *, slots: int = 1, text: str = "") -> None:
    """``config`` trains the digits to ≥ 90% validation accuracy, every slot taking part,
    and leaves a checkpoint with Determined's keys."""
    ctx = copy_digits(tmp / "ctx")
    if text:
        (ctx / config).write_text(text)
    out = h.run("experiment", "create", str(ctx / config), str(ctx), "-f", timeout=300).stdout
    d = h.describe(1)
    assert d["experiment"]["state"] == "COMPLETED", (d, out[-3000:])
    trial = d["trials"][0]
    val = validations(h, trial["id"])
    assert len(val) == 5 and [v["steps_completed"] for v in val] == [45, 90, 135, 180, 225]
    assert val[-1]["metrics"]["validation_accuracy"] >= 0.9, val[-1]
    assert val[-1]["metrics"]["epochs"] == 5 and val[-1]["metrics"]["batches"] == 225
    training = [r for r in h.metrics(trial["id"]) if r["group"] == "training"]
    assert training and {"loss", "accuracy"} <= set(training[-1]["metrics"])
    if slots > 1:
        for rank in range(slots):
            assert f"[rank={rank}]" in out, (rank, out[-3000:])
    state = state_dict(h, trial["latest_checkpoint"])
    assert {"models_state_dict", "optimizers_state_dict", "lr_schedulers_state_dict",
            "callbacks", "rng_state"} <= set(state)
    assert not any(k.startswith("module.") for k in state["models_state_dict"][0])
    assert_loads_for_inference(h.state / "checkpoints" / trial["latest_checkpoint"])


def assert_loads_for_inference(ckpt: Path) -> None:
    """The checkpoint gives back its trial (class from its code/ copy) with weights that
    classify the validation digits as well as the trial reported."""
    import torch

    from hpcdet.pytorch import load_trial_from_checkpoint_path

    trial: Any = load_trial_from_checkpoint_path(ckpt)
    assert type(trial).__name__ in ("DigitsTrial", "SlowDigits")
    x, y = trial.build_validation_data_loader().dataset.tensors
    with torch.no_grad():
        accuracy = (trial.model(x).argmax(dim=1) == y).float().mean().item()
    assert accuracy >= 0.9, accuracy


PAUSABLE = """\
import time

import model_def


class SlowDigits(model_def.DigitsTrial):
    def train_batch(self, batch, epoch_idx, batch_idx):
        # 225 batches take 18 s or more: the test sees training start and pauses well
        # before the end, even when a loaded machine slows the CLI calls in between.
        time.sleep(0.08)
        return super().train_batch(batch, epoch_idx, batch_idx)
"""


def _pausable_config(ctx: Path, name: str, base: str) -> Path:
    cfg = ctx / f"{name}.yaml"
    cfg.write_text(
        (ctx / base).read_text()
        .replace("name: digits-distributed", "name: digits-const")
        .replace("name: digits-const", f"name: {name}")
        .replace("model_def:DigitsTrial", "slow:SlowDigits")
        + "reproducibility:\n  experiment_seed: 7\nscheduling_unit: 5\n"
    )
    return cfg


def pause_resumes_bitwise(h: Hpcdet, tmp: Path, base: str = "const.yaml",
                          tolerance: float = 0.0) -> int:
    """Paused mid-run and activated, the trial resumes at the batch it stopped at and ends
    with the weights of an uninterrupted run of the same seed: the very same, or within
    ``tolerance`` (absolute). Returns the batch the pause landed at."""
    import torch

    ctx = copy_digits(tmp / "ctx")
    (ctx / "slow.py").write_text(PAUSABLE)
    paused_exp = h.create(_pausable_config(ctx, "paused", base), ctx)
    whole_exp = h.create(_pausable_config(ctx, "whole", base), ctx)  # alongside, untouched
    h.wait_for("training to start", lambda: any(
        r["group"] == "training" for t in h.describe(paused_exp)["trials"]
        for r in h.metrics(t["id"])), timeout=180)
    h.run("experiment", "pause", str(paused_exp))
    h.wait_for("the trial to pause",
               lambda: h.describe(paused_exp)["trials"][0]["state"] == "PAUSED", timeout=180)
    paused_at = h.describe(paused_exp)["trials"][0]["steps_completed"]
    assert 0 < paused_at < 225, paused_at
    h.run("experiment", "activate", str(paused_exp))
    for exp in (paused_exp, whole_exp):
        assert h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=400)["experiment"][
            "state"] == "COMPLETED", h.describe(exp)
    paused, whole = (h.describe(e)["trials"][0] for e in (paused_exp, whole_exp))
    assert len(h.describe(paused_exp)["runs"]) == 2
    second = [r for r in h.metrics(paused["id"]) if r["run_id"] == 2]
    assert second and min(r["steps_completed"] for r in second) > paused_at
    a, b = (state_dict(h, t["latest_checkpoint"]) for t in (paused, whole))
    for mine, theirs in zip(a["models_state_dict"][0].values(),
                            b["models_state_dict"][0].values()):
        if tolerance:
            assert torch.allclose(mine, theirs, rtol=0, atol=tolerance)
        else:
            assert torch.equal(mine, theirs)
    if not tolerance:
        assert validations(h, paused["id"])[-1]["metrics"] == validations(h, whole["id"])[-1][
            "metrics"]
    return int(paused_at)
