"""Training lengths: ``det.pytorch.Batch(n)`` and ``Epoch(n)``, and the config's forms."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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
    ``default_unit``); ``None`` for none or zero (a period that is not set)."""
    if length is None:
        return None
    if isinstance(length, int) and not isinstance(length, bool):
        return UNITS[default_unit](length) if length else None
    if isinstance(length, Mapping) and len(length) == 1:
        (key, value), = length.items()
        if key in UNITS and isinstance(value, int):
            return UNITS[key](value) if value else None
    raise ValueError(f"a length must be {{batches|records|epochs: N}}, not {length!r}")
