"""Reporting metrics, progress and status of a trial (``core_context.train``).

Reports are validated at call time with Determined's rules and messages (the master's rules
included, since hpcdet has no master to refuse them later), then handed to the run's event log,
which a background thread writes. A report therefore costs microseconds and never blocks on
the filesystem.
"""

from __future__ import annotations

import collections
import copy
import enum
import json
import logging
import math
import numbers
import operator
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcdet.core._events import RunEvents
from hpcdet.rundir.control import read_control

logger = logging.getLogger("hpcdet.core")

# (group, steps) reports remembered to refuse conflicting re-reports at call time. Older
# duplicates are rare (a step is normally re-reported right away); the daemon merges those.
_HISTORY = 4096
_PLAIN = frozenset({int, float, str, bool, type(None)})


class EarlyExitReason(enum.Enum):
    """Why a trial stopped before its searcher asked it to."""

    INVALID_HP = "EXITED_REASON_INVALID_HP"
    USER_REQUESTED_STOP = "EXITED_REASON_USER_REQUESTED_STOP"


class TensorboardMode(enum.Enum):
    """Whether hpcdet (``AUTO``) or the user (``MANUAL``) publishes TensorBoard files."""

    AUTO = "AUTO"
    MANUAL = "MANUAL"


def _check_group(group: str) -> None:
    if not isinstance(group, str) or not group:
        raise ValueError(f"metric group must be a non-empty string, not {group!r}")
    if "." in group:
        raise ValueError("metric group cannot contain '.'")


def _check_steps(steps_completed: Any) -> int:
    if isinstance(steps_completed, bool):
        raise TypeError("steps_completed must be an int, not bool")
    try:
        return operator.index(steps_completed)
    except TypeError:
        raise TypeError(
            f"steps_completed must be an int, not {type(steps_completed).__name__}"
        ) from None


def _check_value(key: str, value: Any) -> None:
    if type(value) in _PLAIN:
        return
    if isinstance(value, (bytes, bytearray)):
        raise TypeError(f"metric {key!r} is {type(value).__name__}, which cannot be reported")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_value(f"{key}.{k}", v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _check_value(key, v)
    elif not (isinstance(value, (int, float, str)) or callable(getattr(value, "tolist", None))):
        raise TypeError(
            f"metric {key!r} is a {type(value).__name__}; report numbers, strings, lists, "
            "dicts or numpy values"
        )


def _checked_copy(metrics: Any) -> dict[str, Any]:
    """A shallow copy of ``metrics`` (the caller may reuse its dict) after the value rules."""
    if not isinstance(metrics, dict):
        raise TypeError(f"metrics must be a dict, not {type(metrics).__name__}")
    for key, value in metrics.items():
        _check_value(key, value)
    for key in ("epoch", "epochs"):
        if key in metrics:
            value = metrics[key]
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(f"cannot add metric with non numeric '{key}' value got {value}")
    return dict(metrics)


def _validation_values(metrics: Any) -> Any:
    if not isinstance(metrics, dict):
        return metrics  # _checked_copy raises the TypeError
    for key, value in metrics.items():
        if value is None:
            raise RuntimeError(f"Validation metric '{key}' returned an invalid scalar value: None")
    dropped = [k for k, v in metrics.items() if isinstance(v, (bytes, bytearray))]
    if not dropped:
        return metrics
    logger.warning("Removed non serializable metrics: %s", ", ".join(dropped))
    return {k: v for k, v in metrics.items() if k not in dropped}


def merge_metadata(old: dict[str, Any], new: Any) -> dict[str, Any]:
    """``new`` merged into a copy of ``old``: nested dicts merge key by key, anything else
    replaces what was there."""
    if not isinstance(new, dict):
        raise TypeError(f"metadata must be a dict, not {type(new).__name__}")
    try:
        json.dumps(new, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"metadata must be JSON: {e}") from None
    merged = copy.deepcopy(old)
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_metadata(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    a = a.tolist() if callable(getattr(a, "tolist", None)) else a
    b = b.tolist() if callable(getattr(b, "tolist", None)) else b
    return bool(a == b)


class _ReportedSteps:
    """Merges re-reports of one (group, steps) like Determined's master, refusing conflicts."""

    def __init__(self) -> None:
        self._seen: collections.OrderedDict[tuple[str, int], tuple[dict[str, Any], bool]] = (
            collections.OrderedDict()
        )

    def add(self, group: str, steps: int, metrics: dict[str, Any], batches: bool) -> None:
        key = (group, steps)
        prev = self._seen.get(key)
        if prev is None:
            self._seen[key] = (metrics, batches)
            if len(self._seen) > _HISTORY:
                self._seen.popitem(last=False)
            return
        old, old_batches = prev
        if batches and old_batches:
            raise ValueError("overwriting batch metrics is not supported")
        for k, v in metrics.items():
            if k in old and not _same(old[k], v):
                raise ValueError(
                    f"overwriting existing metric keys is not supported, conflicting key: {k}"
                )
        # A new dict: the old one may still sit in the event buffer, unwritten.
        self._seen[key] = ({**old, **metrics}, old_batches or batches)
        self._seen.move_to_end(key)


class TrainContext:
    """Reports a trial's metrics, progress and status to the hpcdet daemon.

    Args:
        events: The run's event log.
        control_path: The daemon's ``control.json`` for this run.
        tensorboard_path: Where TensorBoard files of this trial belong (shared storage).
        tensorboard_mode: ``AUTO`` or ``MANUAL``, as given to ``core.init()``.
    """

    def __init__(
        self,
        events: RunEvents,
        *,
        control_path: Path,
        tensorboard_path: Path,
        tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self._events = events
        self._control_path = control_path
        self._tensorboard_path = tensorboard_path
        self._tensorboard_mode = tensorboard_mode
        self._steps = _ReportedSteps()
        self._early_exit_reported = False
        self._metadata: dict[str, Any] = dict(metadata or {})

    def report_training_metrics(
        self,
        steps_completed: int,
        metrics: dict[str, Any],
        batch_metrics: list[dict[str, Any]] | None = None,
    ) -> None:
        """Report training metrics (group ``"training"``) at ``steps_completed``.

        Raises:
            TypeError: A value cannot be serialized, or ``steps_completed`` is not an int.
            ValueError: ``epoch``/``epochs`` is not a number, or the same step was already
                reported with a different value for one of these keys (or batch metrics).
        """
        logger.info(
            "report_training_metrics(steps_completed=%s, metrics=%s)", steps_completed, metrics
        )
        self._report("training", steps_completed, metrics, batch_metrics)

    def report_validation_metrics(self, steps_completed: int, metrics: dict[str, Any]) -> None:
        """Report validation metrics (group ``"validation"``) at ``steps_completed``.

        ``bytes`` values are dropped with a warning; otherwise the rules of
        :meth:`report_training_metrics` apply.

        Raises:
            RuntimeError: A value is ``None``.
        """
        logger.info(
            "report_validation_metrics(steps_completed=%s, metrics=%s)", steps_completed, metrics
        )
        self._report("validation", steps_completed, _validation_values(metrics), None)

    def report_metrics(self, group: str, steps_completed: int, metrics: dict[str, Any]) -> None:
        """Report metrics of any group; ``"training"``/``"validation"`` are the built-in ones.

        Raises:
            ValueError: ``group`` is empty or contains ``'.'``, or a rule of
                :meth:`report_training_metrics` is broken.
        """
        logger.info(
            "report_metrics(group=%s, steps_completed=%s, metrics=%s)",
            group, steps_completed, metrics,
        )
        self._report(group, steps_completed, metrics, None)

    def _report(
        self,
        group: str,
        steps_completed: int,
        metrics: dict[str, Any],
        batch_metrics: list[dict[str, Any]] | None,
    ) -> None:
        _check_group(group)
        steps = _check_steps(steps_completed)
        body = _checked_copy(metrics)
        batches = None if batch_metrics is None else [_checked_copy(m) for m in batch_metrics]
        self._steps.add(group, steps, body, batches is not None)
        self._events.emit(
            "metrics",
            {"group": group, "steps_completed": steps, "metrics": body, "batch_metrics": batches},
        )

    def _report_trial_metrics(
        self,
        group: str,
        total_batches: int,
        metrics: dict[str, Any],
        batch_metrics: list[dict[str, Any]] | None = None,
    ) -> None:
        """Determined's older private spelling of :meth:`report_metrics`, which some of its
        own examples call."""
        if batch_metrics is not None and group != "training":
            raise ValueError("batch_metrics can only be reported for the 'training' group")
        self._report(group, total_batches, metrics, batch_metrics)

    def set_metadata(self, metadata: dict[str, Any]) -> None:
        """Merge ``metadata`` into the trial's metadata (nested dicts merge, other values
        replace) and store it; ``hpcdet trial describe`` shows it.

        Raises:
            TypeError: ``metadata`` is not a dict, or does not serialize to JSON.
        """
        self._metadata = merge_metadata(self._metadata, metadata)
        self._events.emit("metadata", {"metadata": self._metadata})

    def get_metadata(self) -> dict[str, Any]:
        """The trial's metadata: what this and earlier runs of the trial set."""
        return copy.deepcopy(self._metadata)

    def report_progress(self, progress: float) -> None:
        """Report the fraction of the trial's training done, in [0, 1].

        Raises:
            ValueError: ``progress`` is outside [0, 1].
        """
        if not 0 <= progress <= 1:
            raise ValueError(f"Progress should be between 0 and 1, not {progress}")
        self._events.emit("progress", {"progress": float(progress)})

    def set_status(self, status: str) -> None:
        """Show a short free-form status for the trial (e.g. ``"validating"``)."""
        self._events.emit("status", {"status": str(status)})

    def get_experiment_best_validation(self) -> float | None:
        """The experiment's best searcher metric so far, as the daemon last published it.

        Returns ``None`` before the daemon has seen a validation of ``searcher.metric``.
        """
        try:
            return read_control(self._control_path).best_validation
        except ValueError:
            return None

    def report_early_exit(self, reason: EarlyExitReason) -> None:
        """Tell the searcher that this trial ends early and why; only the first report counts."""
        reason = EarlyExitReason(reason)
        if self._early_exit_reported:
            logger.warning("early exit has already been reported for this trial, ignoring")
            return
        self._events.emit("early_exit", {"reason": reason.name}, flush=True)
        self._early_exit_reported = True

    def get_tensorboard_path(self) -> Path:
        """The directory for this trial's TensorBoard files, on the shared storage."""
        self._tensorboard_path.mkdir(parents=True, exist_ok=True)
        return self._tensorboard_path

    def upload_tensorboard_files(
        self,
        selector: Callable[[Path], bool] = lambda _: True,
        mangler: Callable[[Path, int], Path] = lambda p, _: p,
    ) -> None:
        """In ``MANUAL`` mode, publish TensorBoard files; they are already on shared storage.

        Raises:
            RuntimeError: In ``AUTO`` mode.
        """
        if self._tensorboard_mode != TensorboardMode.MANUAL:
            raise RuntimeError("upload_tensorboard_files can only be used in MANUAL mode")


class DummyTrainContext:
    """Off-cluster stand-in for :class:`TrainContext`: every report is only logged."""

    def __init__(self) -> None:
        self._metadata: dict[str, Any] = {}
        self._tensorboard: Path | None = None

    def report_training_metrics(
        self,
        steps_completed: int,
        metrics: dict[str, Any],
        batch_metrics: list[dict[str, Any]] | None = None,
    ) -> None:
        """Log the report."""
        logger.info(
            "report_training_metrics(steps_completed=%s, metrics=%s)", steps_completed, metrics
        )

    def report_validation_metrics(self, steps_completed: int, metrics: dict[str, Any]) -> None:
        """Log the report."""
        logger.info(
            "report_validation_metrics(steps_completed=%s, metrics=%s)", steps_completed, metrics
        )

    def report_metrics(self, group: str, steps_completed: int, metrics: dict[str, Any]) -> None:
        """Log the report."""
        logger.info(
            "report_metrics(group=%s, steps_completed=%s, metrics=%s)",
            group, steps_completed, metrics,
        )

    def report_progress(self, progress: float) -> None:
        """Log the report."""
        logger.info("report_progress(progress=%s)", progress)

    def set_status(self, status: str) -> None:
        """Log the status."""
        logger.info("set_status(status=%s)", status)

    def _report_trial_metrics(
        self,
        group: str,
        total_batches: int,
        metrics: dict[str, Any],
        batch_metrics: list[dict[str, Any]] | None = None,
    ) -> None:
        """Log the report."""
        self.report_metrics(group, total_batches, metrics)

    def set_metadata(self, metadata: dict[str, Any]) -> None:
        """Merge and log the metadata."""
        self._metadata = merge_metadata(self._metadata, metadata)
        logger.info("set_metadata(metadata=%s)", metadata)

    def get_metadata(self) -> dict[str, Any]:
        """What :meth:`set_metadata` set in this process."""
        return copy.deepcopy(self._metadata)

    def get_experiment_best_validation(self) -> float | None:
        """Always ``None``: off-cluster there is no experiment."""
        return None

    def report_early_exit(self, reason: EarlyExitReason) -> None:
        """Log the report."""
        logger.info("report_early_exit(reason=%s)", EarlyExitReason(reason).name)

    def get_tensorboard_path(self) -> Path:
        """A directory of this context's alone under the system's temporary directory: made
        anew (mode 0700, a name no one could have taken before), since a fixed name there is
        one another user could make first and read or plant files in."""
        if self._tensorboard is None:
            self._tensorboard = Path(tempfile.mkdtemp(prefix="hpcdet-tensorboard-"))
        return self._tensorboard

    def upload_tensorboard_files(
        self,
        selector: Callable[[Path], bool] = lambda _: True,
        mangler: Callable[[Path, int], Path] = lambda p, _: p,
    ) -> None:
        """Nothing to publish off-cluster."""
