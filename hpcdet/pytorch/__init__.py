"""hpcdet's PyTorch API: Determined's ``determined.pytorch`` (``PyTorchTrial``, its context,
``DataLoader``, callbacks, reducers and the ``Trainer``), trained by a loop on the Core API.

Trial code imports it as ``determined.pytorch`` through the shim. It needs torch in the
trial's environment; nothing else of hpcdet imports it.
"""

from __future__ import annotations

from hpcdet.pytorch._callback import PyTorchCallback
from hpcdet.pytorch._context import PyTorchTrialContext, to_device
from hpcdet.pytorch._data import DataLoader
from hpcdet.pytorch._load import load_trial_from_checkpoint_path
from hpcdet.pytorch._lr_scheduler import LRScheduler
from hpcdet.pytorch._reducer import MetricReducer, Reducer
from hpcdet.pytorch._state import STATE_FILE
from hpcdet.pytorch._trainer import Trainer, init
from hpcdet.pytorch._trial import PyTorchTrial, TorchData
from hpcdet.pytorch._units import Batch, Epoch, Record, TrainUnit

__all__ = [
    "STATE_FILE",
    "Batch",
    "DataLoader",
    "Epoch",
    "LRScheduler",
    "MetricReducer",
    "PyTorchCallback",
    "PyTorchTrial",
    "PyTorchTrialContext",
    "Record",
    "Reducer",
    "TorchData",
    "TrainUnit",
    "Trainer",
    "init",
    "load_trial_from_checkpoint_path",
    "to_device",
]
