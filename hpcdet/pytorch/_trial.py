"""``det.pytorch.PyTorchTrial``: the methods a trial class defines for the loop to call."""

from __future__ import annotations

import abc
import importlib
import inspect
from typing import Any, Union

import torch

from hpcdet.errors import TrialClassError
from hpcdet.pytorch._callback import PyTorchCallback
from hpcdet.pytorch._context import PyTorchTrialContext
from hpcdet.pytorch._data import DataLoader
from hpcdet.pytorch._reducer import Reducer

TorchData = Union[dict[str, torch.Tensor], list[torch.Tensor], tuple[torch.Tensor, ...],
                  torch.Tensor]


class PyTorchTrial(abc.ABC):
    """A model, its data and one step of training, for the loop to run.

    Define ``__init__(context)``, ``build_training_data_loader``,
    ``build_validation_data_loader``, ``train_batch``, and ``evaluate_batch`` or
    ``evaluate_full_dataset``.
    """

    @abc.abstractmethod
    def __init__(self, context: PyTorchTrialContext) -> None:
        """Build the models, optimizers and schedulers, wrapped through ``context``."""

    @abc.abstractmethod
    def build_training_data_loader(self) -> DataLoader:
        """The training data, as a ``det.pytorch.DataLoader``."""

    @abc.abstractmethod
    def build_validation_data_loader(self) -> DataLoader:
        """The validation data, as a ``det.pytorch.DataLoader``."""

    @abc.abstractmethod
    def train_batch(
        self, batch: TorchData, epoch_idx: int, batch_idx: int
    ) -> torch.Tensor | dict[str, Any]:
        """Train on one batch; return its metrics (a dict, or the loss tensor)."""

    def evaluate_batch(self, batch: TorchData, batch_idx: int) -> dict[str, Any]:
        """The metrics of one validation batch (reduced by :meth:`evaluation_reducer`)."""
        raise NotImplementedError

    def evaluate_full_dataset(self, data_loader: torch.utils.data.DataLoader[Any]
                              ) -> dict[str, Any]:
        """The validation metrics of the whole validation set (chief only)."""
        raise NotImplementedError

    def evaluation_reducer(self) -> Reducer | dict[str, Reducer]:
        """How :meth:`evaluate_batch` metrics are reduced: one Reducer or one per metric."""
        return Reducer.AVG

    def build_callbacks(self) -> dict[str, PyTorchCallback]:
        """Callbacks by name; the name keys each one's state in checkpoints."""
        return {}

    def get_batch_length(self, batch: Any) -> int:
        """The number of records in ``batch``: the loop counts the records trained and
        validated with it (the ``records`` time metric, the validation log). Override it
        for a batch of another type (e.g. ``return batch.num_graphs``)."""
        if isinstance(batch, torch.Tensor):
            return int(batch.shape[0])
        if type(batch).__module__ == "numpy" and batch.ndim > 0:
            return int(batch.shape[0])
        if isinstance(batch, dict):
            return self.get_batch_length(next(iter(batch.values())))
        if isinstance(batch, (list, tuple)):
            return self.get_batch_length(batch[0])
        raise ValueError(
            f"cannot tell the length of a batch of type {type(batch).__name__}; override "
            "get_batch_length()"
        )


def evaluation_mode(trial_class: type) -> str:
    """``"batch"`` or ``"full"``: which validation method the class defines.

    Raises:
        TrialClassError: It defines both or neither, or lacks a method the loop calls.
    """
    name = trial_class.__name__
    if not (isinstance(trial_class, type) and issubclass(trial_class, PyTorchTrial)):
        raise TrialClassError(f"{name} is not a subclass of det.pytorch.PyTorchTrial")
    missing = sorted(getattr(trial_class, "__abstractmethods__", ()))
    if missing:
        raise TrialClassError(
            f"{name} does not define {', '.join(missing)}, which every PyTorchTrial must "
            "define"
        )
    batch = trial_class.evaluate_batch is not PyTorchTrial.evaluate_batch
    full = trial_class.evaluate_full_dataset is not PyTorchTrial.evaluate_full_dataset
    if batch == full:
        raise TrialClassError(
            f"{name} must define exactly one of evaluate_batch() and evaluate_full_dataset(),"
            f" not {'both' if batch else 'neither'}"
        )
    return "batch" if batch else "full"


def evaluate_batch_takes_index(trial_class: type[PyTorchTrial]) -> bool:
    """Whether ``evaluate_batch`` takes ``batch_idx`` (Determined's newer signature)."""
    params = inspect.signature(trial_class.evaluate_batch).parameters
    return "batch_idx" in params or len(params) >= 3


def load_trial_class(spec: str) -> type:
    """The class named by an entrypoint ``module:Class``, imported from ``sys.path``.

    Raises:
        TrialClassError: The module or class cannot be found, or is not a PyTorchTrial.
    """
    module_name, _, class_name = spec.partition(":")
    if not module_name or not class_name:
        raise TrialClassError(f"{spec!r} is not a trial class; write module:Class, e.g. "
                          "model_def:MyTrial")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and module_name.startswith(e.name):
            raise TrialClassError(
                f"cannot import {module_name} for the trial class {spec}: {e}; is "
                f"{module_name.replace('.', '/')}.py in the context directory?") from None
        raise TrialClassError(f"importing {module_name} for the trial class {spec} failed: {e}"
                              ) from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise TrialClassError(f"module {module_name} has no class {class_name} (entrypoint {spec})")
    evaluation_mode(cls)
    return cls  # type: ignore[no-any-return]
