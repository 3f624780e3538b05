"""What every search method implements, and what they share: trial creation and metric parsing.

A search method sees only events about trials it created, after the experiment-level
``Searcher`` has filtered out unknown trials, repeated exits and events after the search ended.
Methods raise ``SearchFailed`` when the search cannot go on (e.g. a validation without the
searcher metric); the ``Searcher`` turns that into ``Shutdown(failure=True, message=...)``.
"""

from __future__ import annotations

import abc
import json
import math
import numbers
from collections.abc import Mapping
from typing import Any

from hpcdet.search.base import Action, Create
from hpcdet.search.rng import MT19937
from hpcdet.search.space import sample

# The metric an early-exited trial is ranked with (after negation for larger-is-better).
EXITED_METRIC = 1.7976931348623157e308  # Go's math.MaxFloat64


class SearchFailed(Exception):
    """The search cannot continue; the message is shown to the user as the experiment's error."""


class TrialFactory:
    """Makes ``Create`` decisions: request ids 0, 1, 2, ..., sampled hyperparameters, seeds.

    All draws come from one generator in decision order: the hyperparameters, then (0.37 only)
    the 16 bytes Determined 0.37 drew for the request's UUID, then ``trial_seed``.
    """

    def __init__(
        self, space: Mapping[str, Any], rng: MT19937, *, legacy_request_ids: bool
    ) -> None:
        self.space = space
        self.rng = rng
        self.legacy_request_ids = legacy_request_ids
        self.created: list[int] = []

    def create(self, hparams: dict[str, Any] | None = None) -> Create:
        point = sample(self.space, self.rng) if hparams is None else hparams
        if self.legacy_request_ids:
            self.rng.read_bytes(16)  # 0.37: model.NewRequestID read a UUID from the generator
        seed = self.rng.trial_seed()
        request_id = len(self.created)
        self.created.append(request_id)
        return Create(request_id=request_id, hparams=point, trial_seed=seed)


class SearchMethod(abc.ABC):
    """One search algorithm (or one ASHA bracket): events about its trials in, decisions out."""

    @abc.abstractmethod
    def initial(self) -> list[Action]:
        """The decisions made when the experiment starts."""

    def validation(self, request_id: int, metrics: Mapping[str, Any]) -> list[Action]:
        """A trial reported validation metrics (only 0.38 ASHA decides on them)."""
        return []

    def op_completed(self, request_id: int, length: int, metric: Any) -> list[Action]:
        """0.37: a trial completed its ``ValidateAfter(length)`` with ``metric``."""
        return []

    @abc.abstractmethod
    def exited(self, request_id: int, reason: str) -> list[Action]:
        """A trial is final, for ``reason`` (one of base.EXIT_*)."""

    @abc.abstractmethod
    def progress(self) -> float:
        """Search progress in [0, 1]."""

    @abc.abstractmethod
    def trial_count_bound(self) -> int:
        """The most trials this method creates (invalid-hyperparameter replacements aside)."""

    @abc.abstractmethod
    def concurrency(self) -> int:
        """The most trials this method keeps running at once."""


def initial_count(max_trials: int, max_concurrent_trials: int) -> int:
    """Random search and grid: all trials when unlimited (0), else up to the concurrency."""
    if max_concurrent_trials == 0:
        return max_trials
    return min(max_trials, max_concurrent_trials)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _show(metrics: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(metrics), sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return repr(dict(metrics))


def _got(metrics: Mapping[str, Any], name: str) -> str:
    return repr(metrics[name]) if name in metrics else "nothing (the key is missing)"


def searcher_metric(metrics: Mapping[str, Any], name: str, smaller_is_better: bool) -> float:
    """0.38: ``metrics[name]`` as a float to minimise (negated when larger is better)."""
    value = _finite(metrics.get(name))
    if value is None:
        raise SearchFailed(
            f"error parsing searcher metric ({name}) from validation metrics: {_show(metrics)};"
            f" the searcher metric {name!r} must be a finite number, got {_got(metrics, name)}"
        )
    return value if smaller_is_better else -value


def time_metric(metrics: Mapping[str, Any], name: str) -> int:
    """0.38: ``metrics[name]`` (the trial's length so far), truncated to an integer."""
    value = _finite(metrics.get(name))
    if value is None or value < 0:
        raise SearchFailed(
            f"error parsing searcher time metric ({name}) in validation metrics:"
            f" {_show(metrics)}; the time metric {name!r} must be a number >= 0 (e.g. batches"
            f" trained so far), got {_got(metrics, name)}"
        )
    return int(value)


def completed_metric(metric: Any, name: str, smaller_is_better: bool) -> float:
    """0.37: the value passed to ``op.report_completed()``, as a float to minimise."""
    value = _finite(metric)
    if value is None:
        raise SearchFailed(
            f"error parsing searcher metric ({name}) from op.report_completed(): the searcher"
            f" metric {name!r} must be a finite number, got {metric!r}"
        )
    return value if smaller_is_better else -value
