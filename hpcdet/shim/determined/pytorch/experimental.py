"""``determined.pytorch.experimental``: what hpcdet offers of Determined's batch inference
API. ``get_default_device`` and the ``TorchBatchProcessor`` base class are here; the
``torch_batch_process`` driver is not (it needs Determined's master), and says what to use
instead when called."""

from __future__ import annotations

import abc
from typing import Any, NoReturn

import torch

__all__ = [
    "TorchBatchProcessor",
    "TorchBatchProcessorContext",
    "get_default_device",
    "torch_batch_process",
]

_INSTEAD = (
    "hpcdet has no torch_batch_process (Determined's batch inference driver): write the "
    "loop with the Core API instead (`with det.core.init(distributed=...) as core:` shard the "
    "dataset by core.distributed.rank and size, store results with "
    "core.checkpoint.store_path() and report with core.train.report_metrics()), or validate "
    "through a PyTorchTrial's evaluate_batch()"
)


def get_default_device(core_context: Any) -> torch.device:
    """This worker's GPU (by its local rank), or the CPU where there is none."""
    if torch.cuda.device_count() == 0:
        return torch.device("cpu")
    return torch.device("cuda", core_context.distributed.local_rank)


class TorchBatchProcessorContext:
    """Not available in hpcdet (built only by ``torch_batch_process``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(_INSTEAD)


class TorchBatchProcessor(metaclass=abc.ABCMeta):
    """The base class of a batch processor, so that modules defining one import; running
    one needs ``torch_batch_process``, which hpcdet does not have."""

    def __init__(self, context: TorchBatchProcessorContext) -> None:
        self.context = context

    @abc.abstractmethod
    def process_batch(self, batch: Any, batch_idx: int) -> None:
        """Process one batch."""

    def on_checkpoint_start(self) -> None:  # noqa: B027  (optional hook)
        """Called before each checkpoint."""

    def on_finish(self) -> None:  # noqa: B027  (optional hook)
        """Called after the last batch."""


def torch_batch_process(*args: Any, **kwargs: Any) -> NoReturn:
    """Not available in hpcdet.

    Raises:
        NotImplementedError: Always, naming what to use instead.
    """
    raise NotImplementedError(_INSTEAD)
