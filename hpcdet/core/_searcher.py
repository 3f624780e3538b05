"""Searcher operations (``core_context.searcher``), Determined 0.37's train-to-length API.

The chief takes operation lengths from an :class:`OpSource`. Today the only source is the
experiment config (``searcher.max_length`` gives one operation); a daemon-fed source can
replace it without touching the iteration logic, and may block in ``next_length()`` until
the daemon has decided.
"""

from __future__ import annotations

import enum
import logging
import numbers
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from hpcdet.core._distributed import DistributedContext

if TYPE_CHECKING:
    from hpcdet.core._context import RunEvents

logger = logging.getLogger("hpcdet.core")

_Emit = Callable[[str, dict[str, Any]], None]


class SearcherMode(enum.Enum):
    """Which workers iterate ``operations()`` (the misspelled value is Determined's)."""

    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHEIF_ONLY"


class Unit(enum.Enum):
    """The unit the experiment config states lengths in."""

    EPOCHS = "EPOCHS"
    RECORDS = "RECORDS"
    BATCHES = "BATCHES"


class OpSource(Protocol):
    """Where the chief gets the length of its next operation."""

    def next_length(self) -> int | None:
        """The next operation's absolute length, or ``None`` when the trial has no more."""


class ConfigOps:
    """One operation whose length is the config's ``searcher.max_length``."""

    def __init__(self, length: int) -> None:
        self._pending: list[int] = [length]

    def next_length(self) -> int | None:
        """``max_length`` once, then ``None``."""
        return self._pending.pop() if self._pending else None


def configured_length(searcher: Mapping[str, Any]) -> tuple[int | None, Unit | None]:
    """``searcher.max_length`` (an int, or the value of ``{batches|records|epochs: N}``).

    Returns:
        ``(length, unit)``; ``(None, unit-or-None)`` when ``max_length`` is absent.

    Raises:
        ValueError: ``max_length`` has another shape.
    """
    raw = searcher.get("max_length")
    unit = None
    if searcher.get("unit"):
        try:
            unit = Unit[str(searcher["unit"]).upper()]
        except KeyError:
            raise ValueError(
                f"searcher.unit must be batches, records or epochs, not {searcher['unit']!r}"
            ) from None
    if raw is None:
        return None, unit
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw, unit
    if isinstance(raw, dict) and len(raw) == 1:
        (key, value), = raw.items()
        if key in ("batches", "records", "epochs") and isinstance(value, int):
            return value, Unit[key.upper()]
    raise ValueError(
        f"searcher.max_length must be an integer or one of {{batches|records|epochs: N}}, "
        f"not {raw!r}"
    )


class SearcherOperation:
    """Train until the absolute length :attr:`length`, validate, then ``report_completed``."""

    def __init__(self, emit: _Emit, length: int, is_chief: bool) -> None:
        self._emit = emit
        self._length = length
        self._is_chief = is_chief
        self._completed = False

    @property
    def length(self) -> int:
        """How far (absolute, in the configured unit) the trial should have trained."""
        return self._length

    def report_progress(self, length: float) -> None:
        """Report how far training toward :attr:`length` has got (chief only).

        Raises:
            RuntimeError: On a non-chief, or with another length after completion.
        """
        if not self._is_chief:
            raise RuntimeError("you must only call op.report_progress() from the chief worker")
        if self._completed and length != self._length:
            raise RuntimeError(
                "you must not call op.report_progress() with a length other than op.length "
                "after op.report_completed()"
            )
        self._emit("searcher_progress", {"length": float(length)})

    def report_completed(self, searcher_metric: Any) -> None:
        """Report the searcher metric for this operation; exactly once, from the chief.

        Args:
            searcher_metric: A number, or a dict of metrics.

        Raises:
            RuntimeError: On a non-chief, or a second time.
            TypeError: ``searcher_metric`` is neither a number nor a dict.
        """
        if not self._is_chief:
            raise RuntimeError("you must only call op.report_completed() from the chief worker")
        if self._completed:
            raise RuntimeError("you may only call op.report_completed() once")
        if isinstance(searcher_metric, dict):
            metric: float | dict[str, Any] = dict(searcher_metric)
        elif isinstance(searcher_metric, numbers.Real) and not isinstance(searcher_metric, bool):
            metric = float(searcher_metric)
        else:
            raise TypeError(
                "op.report_completed() takes a number or a dict of metrics, not "
                f"{type(searcher_metric).__name__}"
            )
        self._completed = True
        self._emit("searcher_completed", {"length": self._length, "metric": metric})


class SearcherContext:
    """Yields the searcher's operations for this trial.

    Args:
        dist: The trial's distributed context.
        events: The run's event log (chief only).
        source: Where operation lengths come from.
        units: The configured unit, if any.
    """

    def __init__(
        self,
        dist: DistributedContext,
        events: RunEvents,
        source: OpSource,
        units: Unit | None = None,
    ) -> None:
        self._dist = dist
        self._emit: _Emit = events.emit
        self._source = source
        self._units = units

    def operations(
        self,
        searcher_mode: SearcherMode = SearcherMode.WorkersAskChief,
        auto_ack: bool = True,
    ) -> Iterator[SearcherOperation]:
        """Iterate this trial's operations; the chief must complete each before the next.

        In ``WorkersAskChief`` mode every worker iterates and receives the chief's lengths.
        ``auto_ack`` is accepted for compatibility: when operations run out, the daemon
        already knows whether it parks or completes the trial, so no acknowledgement is sent.

        Raises:
            RuntimeError: An operation was not completed, or a non-chief iterates in
                ``ChiefOnly`` mode.
        """
        mode = SearcherMode(searcher_mode)
        if self._dist.rank == 0:
            return self._chief_ops(mode)
        if mode == SearcherMode.ChiefOnly:
            raise RuntimeError(
                "you cannot call searcher.operations(searcher_mode=ChiefOnly) from a non-chief "
                "worker."
            )
        return self._worker_ops()

    def _chief_ops(self, mode: SearcherMode) -> Iterator[SearcherOperation]:
        while True:
            length = self._source.next_length()
            if mode == SearcherMode.WorkersAskChief:
                self._dist.broadcast(length)
            if length is None:
                return
            op = SearcherOperation(self._emit, length, is_chief=True)
            yield op
            if not op._completed:
                raise RuntimeError("you must call op.report_completed() on each operation")

    def _worker_ops(self) -> Iterator[SearcherOperation]:
        while True:
            length = self._dist.broadcast(None)
            if length is None:
                return
            yield SearcherOperation(self._emit, length, is_chief=False)

    def acknowledge_out_of_ops(self) -> None:
        """Accepted for compatibility; nothing to acknowledge."""

    def get_configured_units(self) -> Unit | None:
        """The unit of ``searcher.max_length`` (or ``searcher.unit``), if the config states one."""
        return self._units


def _log_emit(type_: str, body: dict[str, Any]) -> None:
    logger.info("%s %s", type_, body)


class DummySearcherContext:
    """Off-cluster stand-in: one operation of length 1, in epochs; reports are logged."""

    def __init__(self, dist: DistributedContext, length: int = 1) -> None:
        self._dist = dist
        self._length = length

    def operations(
        self,
        searcher_mode: SearcherMode = SearcherMode.WorkersAskChief,
        auto_ack: bool = True,
    ) -> Iterator[SearcherOperation]:
        """Yield the one operation."""
        op = SearcherOperation(_log_emit, self._length, is_chief=self._dist.rank == 0)
        yield op
        if op._is_chief and not op._completed:
            raise RuntimeError("you must call op.report_completed() on each operation")

    def acknowledge_out_of_ops(self) -> None:
        """Nothing to acknowledge."""

    def get_configured_units(self) -> Unit | None:
        """Always epochs."""
        return Unit.EPOCHS


_MISSING = (
    "searcher.operations() needs `searcher.max_length` in the experiment config (an integer "
    "or e.g. `max_length: {batches: 100}`). Without it, decide the training length in your "
    "code and report progress with core_context.train.report_progress()."
)


class SearcherContextMissing:
    """The searcher of a trial whose config has no ``searcher.max_length``."""

    def operations(
        self,
        searcher_mode: SearcherMode = SearcherMode.WorkersAskChief,
        auto_ack: bool = True,
    ) -> Iterator[SearcherOperation]:
        """Always raises.

        Raises:
            ValueError: Always, explaining that ``searcher.max_length`` is needed.
        """
        raise ValueError(_MISSING)

    def acknowledge_out_of_ops(self) -> None:
        """Nothing to acknowledge."""

    def get_configured_units(self) -> Unit | None:
        """Always raises ``ValueError`` (no ``max_length``)."""
        raise ValueError(_MISSING)
