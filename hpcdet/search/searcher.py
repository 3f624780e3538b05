"""The experiment's searcher: the one object the daemon feeds events and takes decisions from.

``Searcher(config, hyperparameters, experiment_seed)`` is fed ``Initialize`` first, then the
events of its trials in the order they happened; ``feed`` returns the decisions each causes.
Decisions are a pure function of the events fed so far, so ``Searcher.replay(..., events)`` is
the searcher of an uninterrupted run (see ``hpcdet.search.base``).

The search ends with ``Shutdown`` once every created trial is final and the method created no
new one: ``failure`` when every trial errored, ``cancel`` when every trial was canceled. A
search method that cannot go on (e.g. a validation without the searcher metric) ends it at once
with ``Shutdown(failure=True, message=...)``. After ``Shutdown`` nothing more is decided.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Callable

from hpcdet.config.searcher import SearcherConfig
from hpcdet.search.asha import adaptive_asha, async_halving, uses_validations
from hpcdet.search.base import (
    EXIT_CANCELED,
    EXIT_ERRORED,
    Action,
    Event,
    Initialize,
    OpCompleted,
    Shutdown,
    TrialExited,
    ValidationReported,
)
from hpcdet.search.grid import grid_search
from hpcdet.search.method import SearchFailed, SearchMethod, TrialFactory
from hpcdet.search.random import random_search, single_search
from hpcdet.search.rng import MT19937

MethodFactory = Callable[[SearcherConfig, TrialFactory], SearchMethod]

SEARCH_METHODS: dict[str, MethodFactory] = {
    "single": single_search,
    "random": random_search,
    "grid": grid_search,
    "adaptive_asha": adaptive_asha,
    "async_halving": async_halving,
}


def uses_operations(config: SearcherConfig) -> bool:
    """0.37 shape: trials get ``ValidateAfter`` operations (``max_length`` set, and no
    ``time_metric``/``max_time`` making ASHA decide on validations)."""
    return config.max_length is not None and not uses_validations(config)


class Searcher:
    """Events in, decisions out, for one experiment (see the module docstring)."""

    def __init__(
        self, config: SearcherConfig, hyperparameters: Mapping[str, Any], experiment_seed: int
    ) -> None:
        factory = SEARCH_METHODS.get(config.name)
        if factory is None:
            raise ValueError(
                f"unknown searcher {config.name!r}; use one of {', '.join(SEARCH_METHODS)}"
            )
        self.config = config
        self._trials = TrialFactory(
            hyperparameters, MT19937(experiment_seed),
            legacy_request_ids=uses_operations(config),
        )
        self._method = factory(config, self._trials)
        self._started = False
        self._over = False
        self._exits: dict[int, str] = {}

    @classmethod
    def replay(
        cls,
        config: SearcherConfig,
        hyperparameters: Mapping[str, Any],
        experiment_seed: int,
        events: Iterable[Event],
    ) -> Searcher:
        """The searcher after ``events``, as if it had run without interruption."""
        searcher = cls(config, hyperparameters, experiment_seed)
        for event in events:
            searcher.feed(event)
        return searcher

    def feed(self, event: Event) -> list[Action]:
        """Take one event; return the decisions it causes, in order."""
        if not self._started:
            if not isinstance(event, Initialize):
                raise ValueError(
                    f"a searcher's first event must be Initialize, got {type(event).__name__}"
                )
            self._started = True
            return self._decide(self._method.initial)
        if isinstance(event, Initialize):
            raise ValueError("Initialize was fed twice to the same searcher")
        handler = self._HANDLERS.get(type(event))
        if handler is None:
            raise TypeError(f"not a searcher event: {event!r}")
        return [] if self._over else handler(self, event)

    def _decide(self, step: Callable[[], list[Action]]) -> list[Action]:
        try:
            actions = step()
        except SearchFailed as failed:
            self._over = True
            return [Shutdown(failure=True, message=str(failed))]
        if len(self._exits) == len(self._trials.created):
            actions.append(self._shutdown())
        return actions

    def _shutdown(self) -> Shutdown:
        self._over = True
        requested = len(self._trials.created)
        failed = sum(1 for r in self._exits.values() if r == EXIT_ERRORED)
        canceled = sum(1 for r in self._exits.values() if r == EXIT_CANCELED)
        if requested and failed >= requested:
            message = f"the search failed: every trial errored ({failed} of {requested})"
            return Shutdown(failure=True, message=message)
        return Shutdown(cancel=bool(requested) and canceled >= requested)

    def _live(self, request_id: int) -> bool:
        return 0 <= request_id < len(self._trials.created) and request_id not in self._exits

    def _on_validation(self, event: Event) -> list[Action]:
        assert isinstance(event, ValidationReported)
        if not self._live(event.request_id):
            return []
        return self._decide(lambda: self._method.validation(event.request_id, event.metrics))

    def _on_op_completed(self, event: Event) -> list[Action]:
        assert isinstance(event, OpCompleted)
        if not self._live(event.request_id):
            return []
        return self._decide(
            lambda: self._method.op_completed(event.request_id, event.length, event.metric)
        )

    def _on_exit(self, event: Event) -> list[Action]:
        assert isinstance(event, TrialExited)
        if not self._live(event.request_id):
            return []  # unknown, or reported twice
        self._exits[event.request_id] = event.reason
        return self._decide(lambda: self._method.exited(event.request_id, event.reason))

    _HANDLERS: dict[type, Callable[[Searcher, Event], list[Action]]] = {
        ValidationReported: _on_validation,
        OpCompleted: _on_op_completed,
        TrialExited: _on_exit,
    }

    # ---- questions the daemon asks --------------------------------------------------------------

    def progress(self) -> float:
        """Search progress in [0, 1] (0.0 before Initialize)."""
        if not self._started:
            return 0.0
        value = self._method.progress()
        return value if math.isfinite(value) else 0.0

    def trial_count_bound(self) -> int:
        """The most trials this search creates (job arrays are sized by it). Trials replacing
        ones that exited with invalid hyperparameters come on top."""
        return self._method.trial_count_bound()

    def concurrency(self) -> int:
        """The most trials the search keeps running at once (the array throttle)."""
        return self._method.concurrency()

    def created(self) -> list[int]:
        """Request ids created so far, in creation order."""
        return list(self._trials.created)

    def finished(self) -> bool:
        """Whether the search has decided ``Shutdown``."""
        return self._over
