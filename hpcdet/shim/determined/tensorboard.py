"""``determined.tensorboard``: the parts of Determined's module that apply to hpcdet.

hpcdet has nothing to upload: a trial writes its TensorBoard files straight into its
directory on the shared storage (``get_base_path()``, ``core.train.get_tensorboard_path()``),
where ``hpcdet tensorboard`` reads them. The metric writers are here
(``determined.tensorboard.metric_writers`` too); Determined's upload managers are not.
"""

from __future__ import annotations

import abc
import logging
import numbers
import sys
from pathlib import Path
from typing import Any

from hpcdet.core import get_cluster_info
from hpcdet.rundir.layout import tensorboard_dir

__all__ = [
    "BatchMetricWriter",
    "MetricWriter",
    "get_base_path",
    "get_experiment_sync_path",
    "get_sync_path",
    "metric_writers",
]

logger = logging.getLogger("hpcdet.tensorboard")


def get_sync_path(cluster_id: str, experiment_id: str, trial_id: str) -> Path:
    """A trial's TensorBoard directory, relative to the checkpoint storage."""
    return get_experiment_sync_path(cluster_id, experiment_id) / "trial" / str(trial_id)


def get_experiment_sync_path(cluster_id: str, experiment_id: str) -> Path:
    """An experiment's TensorBoard directory, relative to the checkpoint storage."""
    return Path(cluster_id, "tensorboard", "experiment", str(experiment_id))


def get_base_path(checkpoint_config: dict[str, Any] | None = None) -> Path:
    """The directory this trial's TensorBoard files go to: in hpcdet, the one ``hpcdet
    tensorboard`` reads, on the trial's checkpoint storage (``checkpoint_config`` is
    accepted for Determined's signature; the trial's own storage decides).

    Raises:
        RuntimeError: Not in a trial run by hpcdet.
    """
    info = get_cluster_info()
    if info is None or info.task_type != "TRIAL":
        raise RuntimeError("get_base_path(): there is no trial's TensorBoard directory outside "
                           "a trial; use core_context.train.get_tensorboard_path()")
    path = tensorboard_dir(info._checkpoint_dir, info.cluster_id, info.trial.experiment_id,
                           info.trial.trial_id)
    path.mkdir(parents=True, exist_ok=True)
    return path


class MetricWriter(abc.ABC):
    """Writes scalars somewhere TensorBoard reads (e.g. around a ``SummaryWriter``)."""

    @abc.abstractmethod
    def add_scalar(self, name: str, value: int | float | Any, step: int) -> None:
        """Write one scalar at ``step``."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Start anew (e.g. reopen the event file)."""

    @abc.abstractmethod
    def flush(self) -> None:
        """Write what is buffered."""


def _is_scalar(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, numbers.Real):
        return True
    # numpy scalars and 0-d arrays or tensors
    return getattr(value, "ndim", None) == 0 and hasattr(value, "item")


class BatchMetricWriter:
    """Determined's metric writing: training metrics under ``Determined/<name>`` at each
    batch they belong to, validation metrics under ``Determined/val_<name>``; only
    numeric scalars are written."""

    def __init__(self, writer: MetricWriter) -> None:
        self.writer = writer

    def _write(self, name: str, value: Any, step: int) -> None:
        if _is_scalar(value):
            self.writer.add_scalar("Determined/" + name, value, step)

    def on_train_step_end(self, steps_completed: int, metrics: dict[str, Any],
                          batch_metrics: list[dict[str, Any]] | None = None) -> None:
        """Each batch's metrics at its own step (the last at ``steps_completed``), then
        the reduced metrics no batch had."""
        seen: set[str] = set()
        batches = batch_metrics or []
        for i, batch in enumerate(batches):
            step = steps_completed - len(batches) + i
            for name, value in batch.items():
                self._write(name, value, step)
                seen.add(name)
        for name, value in metrics.items():
            if name not in seen:
                self._write(name, value, steps_completed)
        self.writer.flush()

    def on_validation_step_end(self, steps_completed: int, metrics: dict[str, Any]) -> None:
        for name, value in metrics.items():
            self._write(name if name.startswith("val") else "val_" + name, value,
                        steps_completed)
        self.writer.flush()


def __getattr__(name: str) -> Any:
    raise AttributeError(
        f"determined.tensorboard.{name} is not in hpcdet: trials write TensorBoard files "
        "straight to their directory on the shared storage (get_base_path()), and `hpcdet "
        "tensorboard` serves them; there is nothing to build, sync or upload"
    )


# Determined keeps the writers in a subpackage; one module serves both names here.
metric_writers = sys.modules[__name__]
sys.modules[__name__ + ".metric_writers"] = metric_writers
