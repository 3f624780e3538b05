"""One bracket of 0.38 ASHA: stopping-based, driven by validation reports.

Each report carries the searcher metric and the time metric ``t``. From the trial's current rung
upwards: if ``t`` is below the rung's units, stop checking; else the metric goes into the rung's
sorted list (ties go BEFORE equal metrics). On the top rung the trial is stopped; below it, the
trial is stopped unless its index is below ``max(int(len / d), 1)``, in which case it moves up
and the next rung is checked with the same report. A report that stopped a trial creates a new
one while the bracket has fewer than ``max_trials`` (invalid-hyperparameter trials aside); a
trial that exits without being stopped is not replaced, except after an early exit (error,
user stop, cancel), which ranks it last in its current rung.

Reports from a trial after it was stopped are ignored: hpcdet asks a stopped trial to preempt,
and ranking its later reports again would count it twice.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hpcdet.search.base import EXIT_COMPLETED, EXIT_INVALID_HP, Action, Stop
from hpcdet.search.brackets import initial_trials
from hpcdet.search.method import (
    EXITED_METRIC,
    SearchMethod,
    TrialFactory,
    searcher_metric,
    time_metric,
)


@dataclass(frozen=True)
class StoppingBracketConfig:
    metric: str
    smaller_is_better: bool
    time_metric: str
    units: list[int]
    max_trials: int
    max_concurrent_trials: int
    divisor: float


class StoppingBracket(SearchMethod):
    def __init__(self, trials: TrialFactory, config: StoppingBracketConfig) -> None:
        self._trials = trials
        self._cfg = config
        # Per rung: (metric, request id), sorted by metric; equal metrics keep arrival order
        # reversed, as inserting before equals does.
        self._rungs: list[list[tuple[float, int]]] = [[] for _ in config.units]
        self._rung_of: dict[int, int] = {}  # every trial created, invalid ones included
        self._stopped: set[int] = set()
        self._exited: set[int] = set()
        self._invalid = 0

    def _create(self) -> list[Action]:
        create = self._trials.create()
        self._rung_of[create.request_id] = 0
        return [create]

    def _under_budget(self) -> bool:
        return len(self._rung_of) - self._invalid < self._cfg.max_trials

    def _insert(self, rung: int, request_id: int, metric: float) -> int:
        entries = self._rungs[rung]
        index = bisect.bisect_left([m for m, _ in entries], metric)
        entries.insert(index, (metric, request_id))
        return index

    def initial(self) -> list[Action]:
        cfg = self._cfg
        count = initial_trials(cfg.max_concurrent_trials, cfg.max_trials, cfg.divisor,
                               len(cfg.units))
        return [a for _ in range(count) for a in self._create()]

    def validation(self, request_id: int, metrics: Mapping[str, Any]) -> list[Action]:
        if request_id in self._stopped or request_id in self._exited:
            return []
        cfg = self._cfg
        metric = searcher_metric(metrics, cfg.metric, cfg.smaller_is_better)
        elapsed = time_metric(metrics, cfg.time_metric)
        actions = self._rank(request_id, elapsed, metric)
        if actions and self._under_budget():
            actions.extend(self._create())
        return actions

    def _rank(self, request_id: int, elapsed: int, metric: float) -> list[Action]:
        top = len(self._rungs) - 1
        for r in range(self._rung_of[request_id], top + 1):
            self._rung_of[request_id] = r
            if elapsed < self._cfg.units[r]:
                return []
            index = self._insert(r, request_id, metric)
            keep = max(int(float(len(self._rungs[r])) / self._cfg.divisor), 1)
            if r == top or index >= keep:
                self._stopped.add(request_id)
                return [Stop(request_id)]
        return []

    def exited(self, request_id: int, reason: str) -> list[Action]:
        self._exited.add(request_id)
        if reason == EXIT_INVALID_HP:
            self._invalid += 1
            for entries in self._rungs[: self._rung_of[request_id] + 1]:
                entries[:] = [e for e in entries if e[1] != request_id]
            return self._create()  # its replacement does not count against max_trials
        if reason == EXIT_COMPLETED or request_id in self._stopped:
            return []
        self._insert(self._rung_of[request_id], request_id, EXITED_METRIC)
        return self._create() if self._under_budget() else []

    def progress(self) -> float:
        reported = len(self._rungs[0])
        total = self._cfg.max_trials
        progress = reported / (1.2 * total)
        if reported == total:
            progress = max(progress, (len(self._exited) - self._invalid) / total)
        return progress

    def trial_count_bound(self) -> int:
        return self._cfg.max_trials

    def concurrency(self) -> int:
        cfg = self._cfg
        return initial_trials(cfg.max_concurrent_trials, cfg.max_trials, cfg.divisor,
                              len(cfg.units))
