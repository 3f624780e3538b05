"""Searcher operations (``core_context.searcher``), Determined 0.37's train-to-length API.

The chief takes operation lengths from an :class:`OpSource`: :class:`ControlOps` when the
daemon feeds operations through the run's ``control.json`` (searchers that decide as trials
report, such as 0.37's ASHA), else :class:`ConfigOps` (one operation of
``searcher.max_length``).
"""

from __future__ import annotations

import enum
import logging
import numbers
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from hpcdet.core._distributed import DistributedContext
from hpcdet.core._events import RunEvents
from hpcdet.core._preempt import PreemptWatcher
from hpcdet.rundir.control import Control, ControlFileError, read_control
from hpcdet.rundir.filewatch import FileWatch

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
    """Where the chief gets the length of its next operation.

    :class:`SearcherContext` asks again only after the previous length was completed, so a
    source may count its calls as completed operations.
    """

    def next_length(self) -> int | None:
        """The next operation's absolute length, or ``None`` when the trial has no more."""


class ConfigOps:
    """One operation whose length is the config's ``searcher.max_length``."""

    def __init__(self, length: int) -> None:
        self._pending: list[int] = [length]

    def next_length(self) -> int | None:
        """``max_length`` once, then ``None``."""
        return self._pending.pop() if self._pending else None


# Re-read control.json at least this often even when its stat looks unchanged: a network
# filesystem may cache attributes, or keep the same mtime and size for a quick rewrite.
_FORCED_READ_SECONDS = 2.0


class ControlOps:
    """Operation lengths that the daemon decides and writes into the run's ``control.json``.

    The daemon writes a ``hpcdet.rundir.control.Control``: ``ops`` are the absolute lengths
    of this run's operations in order (a resumed run starts at the first operation not yet
    completed); ``decided`` is how many of this run's ``searcher_completed`` events the daemon
    has processed. Before its i-th operation (i = operations completed so far) the chief waits
    until ``decided >= i``, because only then does ``ops`` hold every operation the searcher
    will give this run now.

    Args:
        control_path: The run's ``control.json``.
        flush: Writes the buffered events at once, so the daemon sees the last
            ``searcher_completed`` without waiting for the background writer.
        watcher: The run's preemption watcher (the scheduler's ``preempt`` file); ``None``
            watches only ``control.json``.
        interval: Seconds between two checks while waiting.
    """

    def __init__(
        self,
        control_path: Path,
        flush: Callable[[], None],
        watcher: PreemptWatcher | None = None,
        interval: float = 0.15,
    ) -> None:
        self._watch = FileWatch(control_path)
        self._flush = flush
        self._watcher = watcher
        self._interval = interval
        self._given = 0
        self._control = Control()
        self._read_at = float("-inf")

    def next_length(self) -> int | None:
        """The next operation's length once the daemon has decided; ``None`` if there is none.

        Blocks (sleeping between checks of one ``stat`` each) until the daemon has processed
        every operation this run completed. ``None`` means either that the searcher has no
        operation for the trial now (the daemon completes it, or resumes it in a new run
        after a promotion), or that preemption was requested while waiting. The stop is not
        acknowledged as a preemption: the daemon knows the trial's operations and decides.

        Raises:
            ValueError: ``control.json`` breaks the protocol (``ops`` or ``decided`` malformed).
            OSError: Writing the event log failed.
        """
        index = self._given
        self._flush()
        if not self._wait_decided(index):
            return None
        ops = self._control.ops or ()
        if index >= len(ops):
            logger.info("the searcher has no further operation for this run (%d done)", index)
            return None
        self._given += 1
        return ops[index]

    def _wait_decided(self, index: int) -> bool:
        """Wait until ``decided >= index``; false if preemption was requested meanwhile."""
        waited = False
        while True:
            self._refresh()
            if self._control.decided >= index:
                return True
            reason = self._preemption()
            if reason is not None:
                logger.info(
                    "stopped waiting for the searcher's next operation: preemption requested "
                    "(%s)", reason,
                )
                return False
            if not waited:
                logger.debug("waiting for the searcher to decide on operation %d", index)
                waited = True
            time.sleep(self._interval)

    def _refresh(self) -> None:
        now = time.monotonic()
        if not self._watch.changed() and now - self._read_at < _FORCED_READ_SECONDS:
            return
        self._read_at = now
        try:
            self._control = read_control(self._watch.path)
        except ControlFileError:
            raise
        except ValueError as e:  # keep the last good content and read again on the next check
            logger.warning("ignoring unreadable %s: %s", self._watch.path, e)

    def _preemption(self) -> str | None:
        if self._control.stop_reason is not None:
            return self._control.stop_reason
        if self._watcher is not None and self._watcher.requested:
            return self._watcher.reason
        return None


def has_daemon_ops(control_path: Path) -> bool:
    """Whether the daemon feeds this run's operations (``control.json`` has ``"ops"``).

    Raises:
        ValueError: ``control.json`` is not a valid control file.
    """
    return read_control(control_path).ops is not None


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
        self._current: SearcherOperation | None = None

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
            op = self._next_op()
            if mode == SearcherMode.WorkersAskChief:
                self._dist.broadcast(None if op is None else op.length)
            if op is None:
                return
            yield op
            if not op._completed:
                raise RuntimeError("you must call op.report_completed() on each operation")

    def _next_op(self) -> SearcherOperation | None:
        # An operation still not completed (its loop was left early) is offered again: the
        # source counts on each length being completed before it is asked for the next.
        if self._current is not None and not self._current._completed:
            return self._current
        length = self._source.next_length()
        self._current = None if length is None else SearcherOperation(self._emit, length, True)
        return self._current

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
