"""A model ``context.wrap_model`` put in DistributedDataParallel still answers for the
module's own attributes (``self.model.weight``, as trials written for one worker read them),
while its state dict, checkpoint keys and gradient averaging stay DistributedDataParallel's:
two gloo workers on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

from tests.support import require_modules

require_modules("torch")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from hpcdet.pytorch import PyTorchTrialContext  # noqa: E402
from hpcdet.pytorch._state import training_state, unwrap  # noqa: E402

WORLD = 2


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(2, 1, bias=False)
        self.scale = 3.0  # a plain attribute, as trials keep hyperparameters

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc(x) * self.scale
        return out

    def describe(self) -> str:
        return "net"


def _context(rank: int, size: int = WORLD) -> PyTorchTrialContext:
    # The context reads only ``distributed`` from the Core API context when wrapping.
    core = types.SimpleNamespace(distributed=types.SimpleNamespace(rank=rank, size=size))
    return PyTorchTrialContext(core, hparams={}, exp_conf={},  # type: ignore[arg-type]
                               trial_seed=0, trial_id=None, experiment_id=None,
                               device=torch.device("cpu"))


def _worker(rank: int, store: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        torch.manual_seed(0)  # the same initial weights on both workers
        ctx = _context(rank)
        inner = Net()
        model: Any = ctx.wrap_model(inner)
        x = torch.full((1, 2), float(rank + 1))
        model(x).sum().backward()
        result = {
            "is_ddp": isinstance(model, torch.nn.parallel.DistributedDataParallel),
            "weight_is_inner": model.fc.weight is inner.fc.weight,
            "scale": model.scale,
            "describe": model.describe(),
            "module_is_inner": model.module is inner,
            "ddp_keys": sorted(model.state_dict()),
            "checkpoint_keys": sorted(training_state(ctx, {}, [{}])["models_state_dict"][0]),
            # Averaged over the workers: 3 * mean(1, 2) = 4.5 for each weight.
            "grad": model.fc.weight.grad.tolist(),
            "unwrapped": unwrap(model) is inner,
        }
        try:
            model.missing  # noqa: B018
        except AttributeError as e:
            result["missing"] = str(e)
        Path(out, f"{rank}.json").write_text(json.dumps(result))
        # Neither worker tears gloo down while the other still uses the pair: one that did
        # aborted the other at exit ("terminate called without an active exception").
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_ddp_reads_through_to_the_module_and_keeps_its_keys(tmp_path: Path) -> None:
    # Processes of their own, as the launcher starts workers (this file runs as a script).
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    workers = [subprocess.Popen([sys.executable, __file__, str(rank), str(tmp_path / "store"),
                                 str(tmp_path)], cwd=root, env=env, stderr=subprocess.PIPE,
                                text=True) for rank in range(WORLD)]
    for w in workers:
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err
    for rank in range(WORLD):
        got = json.loads((tmp_path / f"{rank}.json").read_text())
        assert got["is_ddp"] and got["weight_is_inner"] and got["module_is_inner"]
        assert got["scale"] == 3.0 and got["describe"] == "net" and got["unwrapped"]
        assert got["ddp_keys"] == ["module.fc.weight"]
        assert got["checkpoint_keys"] == ["fc.weight"]
        assert got["grad"] == [[4.5, 4.5]]
        assert "'Net' object has no attribute 'missing'" in got["missing"]


def test_one_worker_gets_the_module_itself() -> None:
    model = Net()
    assert _context(0, size=1).wrap_model(model) is model


if __name__ == "__main__":
    _worker(int(sys.argv[1]), sys.argv[2], sys.argv[3])
    # Past gloo's threads' destructors, which can still abort at interpreter exit.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
