"""Which checkpoints the experiment's checkpoint GC policy keeps, as pure functions.

A checkpoint's *metric* is the searcher metric of the validation its trial reported at the
checkpoint's ``steps_completed``. Ranking is a strict total order that depends on nothing but
the checkpoint itself (its metric, then its steps, report time and uuid), which is what makes
deleting early safe (see :func:`checkpoints_to_delete`).
"""

from __future__ import annotations

import math
import numbers
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class CheckpointRecord:
    """One stored checkpoint.

    Attributes:
        uuid: The checkpoint's storage id.
        trial_id: The trial that reported it.
        steps_completed: The training length it was taken at.
        reported: When it was reported (a timestamp); orders checkpoints of equal steps.
    """

    uuid: str
    trial_id: int
    steps_completed: int
    reported: float


@dataclass(frozen=True)
class ValidationRecord:
    """One validation report: ``metrics`` of ``trial_id`` at ``steps_completed``."""

    trial_id: int
    steps_completed: int
    metrics: Mapping[str, Any]


class GCPolicy(Protocol):
    """The checkpoint_storage fields of the GC policy (a ``CheckpointStorageConfig`` fits)."""

    @property
    def save_experiment_best(self) -> int: ...

    @property
    def save_trial_best(self) -> int: ...

    @property
    def save_trial_latest(self) -> int: ...


@dataclass(frozen=True)
class RetentionPolicy:
    """A GC policy with Determined's defaults, for experiments without checkpoint_storage."""

    save_experiment_best: int = 0
    save_trial_best: int = 1
    save_trial_latest: int = 1


@dataclass(frozen=True)
class Ranked:
    """A checkpoint and its metric (``None`` when no usable validation was at its step)."""

    checkpoint: CheckpointRecord
    metric: float | None


def checkpoints_to_delete(
    checkpoints: Iterable[CheckpointRecord],
    validations: Iterable[ValidationRecord],
    policy: GCPolicy,
    metric: str,
    smaller_is_better: bool,
) -> set[str]:
    """The uuids of ``checkpoints`` that the GC policy does not keep.

    Kept is the union of: the ``save_experiment_best`` best checkpoints overall; per trial,
    its ``save_trial_best`` best; per trial, its ``save_trial_latest`` latest (by
    ``steps_completed``, then report time). A checkpoint without a metric never counts as a
    best one; a value that is not a number, or is NaN, counts as no metric.

    Applying this whenever a trial ends, to the checkpoints of the trials that have ended, is
    safe: the rank of a checkpoint depends only on the checkpoint, so the top N of a larger
    set is drawn from the top N of any subset plus the checkpoints added. A checkpoint
    outside the top N now can never re-enter it as more trials end (per-trial sets are
    final once the trial has ended). This holds as long as the validations of an ended
    trial's checkpoints do not change afterwards.

    Args:
        checkpoints: Checkpoints of trials that have ended.
        validations: Validation reports; those of other trials or steps are ignored.
        policy: ``save_experiment_best``, ``save_trial_best``, ``save_trial_latest``.
        metric: The searcher metric's name.
        smaller_is_better: Whether a smaller metric is better.

    Raises:
        ValueError: A policy count is negative.
    """
    counts = (policy.save_experiment_best, policy.save_trial_best, policy.save_trial_latest)
    if min(counts) < 0:
        raise ValueError(f"checkpoint GC policy counts must not be negative, got {counts}")
    ranked = rank(checkpoints, validations, metric)
    by_trial: dict[int, list[Ranked]] = defaultdict(list)
    for r in ranked:
        by_trial[r.checkpoint.trial_id].append(r)
    kept = _uuids(best(ranked, smaller_is_better)[: policy.save_experiment_best])
    for trial in by_trial.values():
        kept |= _uuids(best(trial, smaller_is_better)[: policy.save_trial_best])
        kept |= _uuids(latest(trial)[: policy.save_trial_latest])
    return {r.checkpoint.uuid for r in ranked} - kept


def rank(
    checkpoints: Iterable[CheckpointRecord],
    validations: Iterable[ValidationRecord],
    metric: str,
) -> list[Ranked]:
    """Each checkpoint with its metric, in the order given.

    Reports of the same trial and step are merged, later values winning (as the daemon
    stores them).
    """
    merged: dict[tuple[int, int], dict[str, Any]] = {}
    for v in validations:
        key = (v.trial_id, v.steps_completed)
        merged[key] = {**merged.get(key, {}), **v.metrics}
    return [
        Ranked(c, _number(merged.get((c.trial_id, c.steps_completed), {}).get(metric)))
        for c in checkpoints
    ]


def best(ranked: Iterable[Ranked], smaller_is_better: bool) -> list[Ranked]:
    """The checkpoints that have a metric, best first.

    Ties go to the later checkpoint (more steps, then reported later), then to the smaller
    uuid, so that the order never depends on which other checkpoints are present.
    """
    sign = 1.0 if smaller_is_better else -1.0
    scored = [(sign * r.metric, r) for r in ranked if r.metric is not None]
    scored.sort(key=lambda pair: (pair[0], _recency(pair[1])))
    return [r for _, r in scored]


def latest(ranked: Iterable[Ranked]) -> list[Ranked]:
    """Latest first (more steps, then reported later, then the smaller uuid)."""
    return sorted(ranked, key=_recency)


def _recency(r: Ranked) -> tuple[int, float, str]:
    """Sort key putting later checkpoints first."""
    c = r.checkpoint
    return -c.steps_completed, -c.reported, c.uuid


def _uuids(ranked: Iterable[Ranked]) -> set[str]:
    return {r.checkpoint.uuid for r in ranked}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    f = float(value)
    return None if math.isnan(f) else f
