"""What a PyTorchTrial's checkpoint holds besides the models' weights: the file names, the
random state of every generator with torch's intra-op thread count (a resume with another
count is not bitwise), and a copy of the trial's code."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn as nn

if TYPE_CHECKING:
    from hpcdet.pytorch._callback import PyTorchCallback
    from hpcdet.pytorch._context import PyTorchTrialContext

logger = logging.getLogger("hpcdet.pytorch")

STATE_FILE = "state-dict.pth"
# Determined's code writes state_dict.pth (its docs say state-dict.pth): read either.
STATE_FILES = (STATE_FILE, "state_dict.pth")
LOAD_DATA_FILE = "load_data.json"
# The trial's Python files, so that load_trial_from_checkpoint_path can import its class.
CODE_DIR = "code"
CODE_LIMIT = 16 * 2**20
CODE_FILES = 2000
TRIAL_STATE_FILE = "trial_state.json"

try:
    import numpy as np
except ImportError:  # numpy is optional in the trial's environment
    np = None  # type: ignore[assignment]


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's generators, as every trial starts."""
    random.seed(seed)
    if np is not None:
        np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """This process's generators and intra-op thread count, as :func:`set_rng_state` takes
    them."""
    state: dict[str, Any] = {"cpu_rng_state": torch.get_rng_state(),
                             "random_rng_state": random.getstate(),
                             "torch_num_threads": torch.get_num_threads()}
    if np is not None:
        state["np_rng_state"] = np.random.get_state()
    if torch.cuda.is_available():
        state["gpu_rng_state"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` saved; a thread count that differs is warned of."""
    torch.set_rng_state(state["cpu_rng_state"])
    random.setstate(state["random_rng_state"])
    if np is not None and "np_rng_state" in state:
        np.random.set_state(state["np_rng_state"])
    if torch.cuda.is_available() and "gpu_rng_state" in state:
        torch.cuda.set_rng_state_all(state["gpu_rng_state"])
    threads = state.get("torch_num_threads")
    if isinstance(threads, int) and threads > 0 and threads != torch.get_num_threads():
        # torch's default comes from the CPUs this process may use (affinity, cgroup,
        # OMP_NUM_THREADS), which a resumed job need not share with the first; CPU kernels
        # (MKL's sgemm among them) split their sums by it, so the weights drift from an
        # uninterrupted run's. Said, not overridden: the count also sets the speed, and a
        # resume on other CPUs may be meant.
        logger.warning(
            "this run uses %d intra-op threads where the checkpointed run used %d: training "
            "goes on, but not bitwise as an uninterrupted run would; for that, pin the count "
            "(OMP_NUM_THREADS in environment.environment_variables, or "
            "torch.set_num_threads in the trial)", torch.get_num_threads(), threads)


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside DistributedDataParallel, whose state dict has no ``module.``."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


def strip_module_prefix(state: dict[str, Any]) -> dict[str, Any]:
    if state and all(k.startswith("module.") for k in state):
        return {k[len("module."):]: v for k, v in state.items()}
    return state


def copy_code(workdir: Path, to: Path) -> None:
    """The Python files of the trial's directory (its model definition), as Determined keeps
    it in checkpoints; hidden and cache directories are skipped, and the copy stops at
    CODE_LIMIT bytes or CODE_FILES files (a trial run from a home directory)."""
    total = files = 0
    for root, dirs, names in os.walk(workdir):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(n for n in names if n.endswith(".py")):
            source = Path(root) / name
            total += source.stat().st_size
            files += 1
            if total > CODE_LIMIT or files > CODE_FILES:
                logger.warning("the trial's directory %s holds more Python than a checkpoint "
                               "keeps; its code/ copy is incomplete", workdir)
                return
            target = to / source.relative_to(workdir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)


def training_state(ctx: PyTorchTrialContext, callbacks: Mapping[str, PyTorchCallback],
                   rng_states: list[dict[str, Any]]) -> dict[str, Any]:
    """What a checkpoint saves: models, optimizers, schedulers, scalers, callbacks and every
    worker's random state."""
    return {
        "models_state_dict": [unwrap(m).state_dict() for m in ctx.models],
        "optimizers_state_dict": [o.state_dict() for o in ctx.optimizers],
        "lr_schedulers_state_dict": [s.state_dict() for s in ctx.lr_schedulers],
        "scalers_state_dict": [s.state_dict() for s in ctx.scalers],
        "callbacks": {name: cb.state_dict() for name, cb in callbacks.items()},
        "rng_state": rng_states[0],
        "rng_states": rng_states,
    }


def load_state(ctx: PyTorchTrialContext, callbacks: Mapping[str, PyTorchCallback], rank: int,
               size: int, state: dict[str, Any]) -> None:
    """Restore what `training_state` saved; worker ``rank`` of ``size`` takes its own random
    state when the checkpoint has one per worker."""
    models = state.get("models_state_dict", [])
    if len(models) != len(ctx.models):
        raise RuntimeError(
            f"the checkpoint holds {len(models)} models, the trial wrapped "
            f"{len(ctx.models)}; wrap the same models as the run that saved it"
        )
    for model, sd in zip(ctx.models, models):
        unwrap(model).load_state_dict(strip_module_prefix(sd))
    for opt, sd in zip(ctx.optimizers, state.get("optimizers_state_dict", [])):
        opt.load_state_dict(sd)
    for sched, sd in zip(ctx.lr_schedulers, state.get("lr_schedulers_state_dict", [])):
        sched.load_state_dict(sd)
    for scaler, sd in zip(ctx.scalers, state.get("scalers_state_dict", [])):
        scaler.load_state_dict(sd)
    saved_callbacks = state.get("callbacks", {})
    for name, cb in callbacks.items():
        if name in saved_callbacks:
            cb.load_state_dict(saved_callbacks[name])
    rng = state.get("rng_states") or []
    if len(rng) == size:
        set_rng_state(rng[rank])
    elif "rng_state" in state:
        set_rng_state(state["rng_state"])


def read_checkpoint(path: Path, uuid: str, device: torch.device
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """A PyTorchTrial checkpoint's state and its trial counters ({} when it has none).

    Raises:
        FileNotFoundError: the checkpoint was not saved by a PyTorchTrial.
    """
    found = [path / n for n in STATE_FILES if (path / n).exists()]
    if not found:
        raise FileNotFoundError(
            f"checkpoint {uuid} has no {STATE_FILE}; it was not saved by a PyTorchTrial")
    state = torch.load(found[0], map_location=device, weights_only=False)
    counters_file = path / TRIAL_STATE_FILE
    counters = json.loads(counters_file.read_text()) if counters_file.exists() else {}
    return state, counters
