"""Training lengths: ``det.pytorch.Batch(n)`` and ``Epoch(n)``, the config's forms, and the
periods and searcher settings the loop trains by."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hpcdet.core._searcher import configured_length


@dataclass(frozen=True)
class TrainUnit:
    """A length of training; ``value`` counts global batches or epochs."""

    value: int

    def __post_init__(self) -> None:
        if not isinstance(self.value, int) or isinstance(self.value, bool) or self.value < 0:
            raise ValueError(f"{type(self).__name__} takes a non-negative integer, not "
                             f"{self.value!r}")

    def batches(self, epoch_len: int, global_batch_size: int) -> int:
        raise NotImplementedError


class Batch(TrainUnit):
    """``value`` global batches (one batch on every worker)."""

    def batches(self, epoch_len: int, global_batch_size: int) -> int:
        return self.value


class Epoch(TrainUnit):
    """``value`` passes over the training data."""

    def batches(self, epoch_len: int, global_batch_size: int) -> int:
        return self.value * epoch_len


class Record(TrainUnit):
    """``value`` records, rounded up to whole global batches."""

    def batches(self, epoch_len: int, global_batch_size: int) -> int:
        return math.ceil(self.value / global_batch_size)


UNITS: dict[str, type[TrainUnit]] = {"batches": Batch, "epochs": Epoch, "records": Record}


def from_config(length: Any, default_unit: str = "batches") -> TrainUnit | None:
    """A config length (``{batches|records|epochs: N}``, or a plain integer counted in
    ``default_unit``), parsed as the Core API parses ``searcher.max_length``; ``None`` for
    none or zero (a period that is not set).

    Raises:
        ValueError: Another shape (the config's validation refuses those at create).
    """
    value, unit = configured_length({"max_length": length})
    if not value:
        return None
    return UNITS[unit.name.lower() if unit else default_unit](value)


@dataclass
class Periods:
    """When the loop reports, validates and checkpoints (``None``: not periodically)."""

    reporting: TrainUnit = field(default_factory=lambda: Batch(100))
    validation: TrainUnit | None = None
    checkpoint: TrainUnit | None = None
    checkpoint_policy: str = "best"
    step_zero_validation: bool = False


@dataclass
class Searcher:
    """What validations are judged by."""

    metric: str | None = None
    smaller_is_better: bool = True
    # Added to validation metrics when absent: the searcher's time_metric (0.38 searchers).
    time_metric: str | None = None
