"""``context.experimental``: the switches Determined's ``PyTorchExperimentalContext`` offers
a ``PyTorchTrial`` (automatic mixed precision, no automatic moves to the device, any torch
DataLoader)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from hpcdet.pytorch._context import PyTorchTrialContext

logger = logging.getLogger("hpcdet.pytorch")


def amp_dtype(device: torch.device) -> torch.dtype:
    """The autocast dtype of automatic mixed precision on ``device``: float16 on GPUs (with a
    GradScaler), bfloat16 on CPUs, whose autocast takes no other."""
    return torch.float16 if device.type == "cuda" else torch.bfloat16


class PyTorchExperimentalContext:
    """What ``context.experimental`` offers; each switch is meant for the trial's
    ``__init__``, before its models are wrapped."""

    def __init__(self, parent: PyTorchTrialContext) -> None:
        self._parent = parent
        self._auto_amp = False
        self._auto_to_device = True
        self._data_repro_checks_disabled = False
        self._scaler: Any = None

    def use_amp(self) -> None:
        """Train with automatic mixed precision, as Determined's ``use_amp()``: the forward
        pass of every model wrapped from now on runs under ``torch.autocast`` (float16 on a
        GPU, bfloat16 on a CPU) and returns float32; on a GPU, :meth:`backward` scales the
        loss with a ``GradScaler``, which :meth:`step_optimizer` steps through (unscaling
        before ``clip_grads``) and the loop updates after each batch.

        Raises:
            RuntimeError: A model was already wrapped, or a scaler too.
        """
        parent = self._parent
        if self._auto_amp:
            return
        if parent.models:
            raise RuntimeError("call context.experimental.use_amp() before context.wrap_model()")
        if parent.scalers:
            raise RuntimeError("use_amp() brings its own GradScaler: do not also call "
                               "context.wrap_scaler()")
        if parent.device.type == "cuda":
            self._scaler = parent.wrap_scaler(torch.amp.GradScaler("cuda"))
        self._auto_amp = True
        logger.info("automatic mixed precision: autocast to %s on %s",
                    amp_dtype(parent.device), parent.device.type)

    def disable_auto_to_device(self) -> None:
        """Leave batches where the data loader put them; the trial moves what it needs
        with ``context.to_device()``."""
        self._auto_to_device = False
        logger.info("disabled automatically moving data to device")

    def disable_dataset_reproducibility_checks(self) -> None:
        """Let ``build_*_data_loader`` return any ``torch.utils.data.DataLoader``. The loop
        then iterates it as it is, epoch after epoch: the workers' shares and where a
        resumed trial starts become the trial's own affair (``determined.pytorch.samplers``
        has the pieces)."""
        self._data_repro_checks_disabled = True
        logger.info("disabled dataset reproducibility checks")
