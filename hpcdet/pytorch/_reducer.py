"""Metric reduction: within a worker over batches, then across workers.

``train_batch`` and ``evaluate_batch`` return a dict of metrics per batch. Training metrics
are averaged over the batches of a reporting period and over the workers. Validation metrics
are reduced as ``evaluation_reducer()`` says (``Reducer.AVG`` by default) over every batch of
every worker; a :class:`MetricReducer` from ``context.wrap_reducer`` reduces what the trial
feeds it, once per worker (``per_slot_reduce``) and then across them (``cross_slot_reduce``).
"""

from __future__ import annotations

import abc
import enum
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import torch


class Reducer(enum.Enum):
    """How a metric's per-batch values become one value."""

    AVG = 1
    SUM = 2
    MAX = 3
    MIN = 4


class MetricReducer(abc.ABC):
    """A reduction the trial feeds itself (e.g. from ``evaluate_batch``), for metrics that
    are not a mean of per-batch values (F1, AUC, ...).

    Define how values arrive (any method, e.g. ``update``), and the three below; register
    it with ``context.wrap_reducer(reducer, name=...)``.
    """

    @abc.abstractmethod
    def reset(self) -> None:
        """Forget everything fed so far; called before each training period and validation."""

    @abc.abstractmethod
    def per_slot_reduce(self) -> Any:
        """This worker's reduction of what it was fed; must be picklable."""

    @abc.abstractmethod
    def cross_slot_reduce(self, per_slot_metrics: Sequence[Any]) -> Any:
        """The final value from every worker's ``per_slot_reduce()``, in rank order: a
        metric value, or (for a reducer wrapped without a name) a dict of metrics."""


def scalar(value: Any) -> Any:
    """A metric value as a plain Python value: a one-element tensor or array becomes a
    number, others a list; everything else is returned as it is."""
    item = getattr(value, "item", None)
    size = getattr(value, "numel", None) or getattr(value, "size", None)
    if callable(item) and (size() if callable(size) else size) == 1:
        return item()
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    return value


_PLAIN_NUMBERS = (float, int)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def reduce_values(values: Sequence[Any], reducer: Reducer) -> Any:
    """One metric's per-batch values reduced; values that are not numbers (or are missing
    from some batches) give ``None`` for AVG/SUM, and are skipped by MAX/MIN."""
    # Nearly every value is a float or an int: the ABC check runs only for the others.
    numbers_ = [v for v in values if type(v) in _PLAIN_NUMBERS or _is_number(v)]
    if reducer in (Reducer.MAX, Reducer.MIN):
        if not numbers_:
            return None
        return max(numbers_) if reducer == Reducer.MAX else min(numbers_)
    if len(numbers_) != len(values) or not numbers_:
        return None
    total = sum(numbers_)
    return total / len(numbers_) if reducer == Reducer.AVG else total


def reduce_batches(
    batches: Sequence[Mapping[str, Any]], reducers: Reducer | Mapping[str, Reducer]
) -> dict[str, Any]:
    """Per-batch metric dicts (of every worker, already plain values) reduced to one dict.

    A metric whose values cannot be reduced (not numbers) keeps its last value.
    """
    names: dict[str, None] = {}
    keys = None
    for batch in batches:
        if batch.keys() != keys:  # mostly the same names as the batch before
            keys = batch.keys()
            names.update(dict.fromkeys(keys))
    out: dict[str, Any] = {}
    for name in names:
        values = [b[name] for b in batches if name in b]
        how = reducers if isinstance(reducers, Reducer) else reducers.get(name, Reducer.AVG)
        reduced = reduce_values(values, how)
        out[name] = values[-1] if reduced is None else reduced
    return out


def check_batches(batches: list[dict[str, Any]], reducers: Reducer | dict[str, Reducer]
                  ) -> list[dict[str, Any]]:
    """Every worker's ``evaluate_batch`` metrics, checked: some, the same names in each, and
    a reducer for each name when there is one per name.

    Raises:
        ValueError: Naming what differs.
    """
    if not batches:
        raise ValueError("the validation data loader is empty: it gave no batch to "
                         "evaluate_batch()")
    names = set(batches[0])
    for b in batches[1:]:
        if set(b) != names:
            raise ValueError("Validation metric names must match across all batches of data: "
                             f"{sorted(names)} != {sorted(b)}")
    if isinstance(reducers, dict) and set(reducers) != names:
        raise ValueError(
            "evaluation_reducer() must return one Reducer, or a Reducer for every validation "
            f"metric: expected keys {sorted(names)}, got {sorted(reducers)}")
    return batches


def check_reducers(reducers: Any) -> Reducer | dict[str, Reducer]:
    """What ``evaluation_reducer()`` returned, checked.

    Raises:
        TypeError: It is neither a Reducer nor a dict of them.
    """
    if isinstance(reducers, Reducer):
        return reducers
    if isinstance(reducers, Mapping) and all(isinstance(v, Reducer) for v in reducers.values()):
        return dict(reducers)
    raise TypeError(
        "evaluation_reducer() must return a det.pytorch.Reducer or a dict of metric name to "
        f"Reducer, not {reducers!r}"
    )


class WrappedReducer:
    """A :class:`MetricReducer` as registered with the context."""

    def __init__(
        self, reducer: MetricReducer, name: str | None, for_training: bool, for_validation: bool
    ) -> None:
        self.reducer = reducer
        self.name = name
        self.for_training = for_training
        self.for_validation = for_validation

    def result(self, per_slot: Sequence[Any]) -> dict[str, Any]:
        """The metrics this reducer adds, from every worker's ``per_slot_reduce()``.

        Raises:
            TypeError: A reducer without a name did not return a dict.
        """
        value = self.reducer.cross_slot_reduce(per_slot)
        if self.name is not None:
            return {self.name: scalar(value)}
        if not isinstance(value, Mapping):
            raise TypeError(
                f"{type(self.reducer).__name__}.cross_slot_reduce() must return a dict of "
                "metrics when the reducer is wrapped without a name "
                "(context.wrap_reducer(reducer, name=None))"
            )
        return {k: scalar(v) for k, v in value.items()}


def plain_metrics(metrics: Any, where: str) -> dict[str, Any]:
    """What ``train_batch``/``evaluate_batch`` returned as a dict of plain values.

    Raises:
        TypeError: It is neither a dict nor a tensor (a tensor is taken as the loss).
    """
    if isinstance(metrics, torch.Tensor):
        metrics = {"loss": metrics}
    if not isinstance(metrics, dict):
        raise TypeError(f"{where} must return a dict of metrics (or the loss tensor), not "
                        f"{type(metrics).__name__}")
    out: dict[str, Any] = {}
    for k, v in metrics.items():
        # item() and tolist() copy the value out, so the tensor needs no detach() first.
        if isinstance(v, torch.Tensor):
            out[str(k)] = v.item() if v.numel() == 1 else v.tolist()
        else:
            out[str(k)] = scalar(v)
    return out
