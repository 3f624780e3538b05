"""Random search (and ``single``, which is random search with one trial).

``min(max_trials, max_concurrent_trials)`` trials start (all of them when the concurrency is 0,
unlimited); every trial that becomes final is replaced while fewer than ``max_trials`` have been
created. A random-search trial that exits with invalid hyperparameters does not count, so it is
always replaced (``single`` does not replace it). 0.37-style configs (``max_length`` set) give
each trial ``ValidateAfter(max_length)`` and ``Close`` with its ``Create``, as Determined did.
"""

from __future__ import annotations

from hpcdet.config.searcher import SearcherConfig
from hpcdet.search.base import EXIT_INVALID_HP, Action, Close, ValidateAfter
from hpcdet.search.method import SearchMethod, TrialFactory, initial_count


class RandomSearch(SearchMethod):
    def __init__(
        self,
        trials: TrialFactory,
        *,
        max_trials: int,
        max_concurrent_trials: int,
        max_length: int | None,
        replace_invalid: bool,
    ) -> None:
        self._trials = trials
        self._max_trials = max_trials
        self._max_concurrent = max_concurrent_trials
        self._max_length = max_length
        self._replace_invalid = replace_invalid
        self._counted = 0  # creates that count towards max_trials
        self._done = 0  # final trials other than invalid-hyperparameter ones

    def _create(self) -> list[Action]:
        create = self._trials.create()
        self._counted += 1
        if self._max_length is None:
            return [create]
        rid = create.request_id
        return [create, ValidateAfter(rid, self._max_length), Close(rid)]

    def initial(self) -> list[Action]:
        actions: list[Action] = []
        for _ in range(initial_count(self._max_trials, self._max_concurrent)):
            actions.extend(self._create())
        return actions

    def exited(self, request_id: int, reason: str) -> list[Action]:
        if reason == EXIT_INVALID_HP and self._replace_invalid:
            self._counted -= 1
        elif reason != EXIT_INVALID_HP:
            self._done += 1
        return self._create() if self._counted < self._max_trials else []

    def progress(self) -> float:
        return min(1.0, self._done / self._max_trials)

    def trial_count_bound(self) -> int:
        return self._max_trials

    def concurrency(self) -> int:
        return initial_count(self._max_trials, self._max_concurrent)


def random_search(config: SearcherConfig, trials: TrialFactory) -> SearchMethod:
    if config.max_trials is None:
        raise ValueError("the random searcher needs max_trials")
    return RandomSearch(
        trials, max_trials=config.max_trials, max_concurrent_trials=config.max_concurrent_trials,
        max_length=config.max_length, replace_invalid=True,
    )


def single_search(config: SearcherConfig, trials: TrialFactory) -> SearchMethod:
    return RandomSearch(
        trials, max_trials=1, max_concurrent_trials=1, max_length=config.max_length,
        replace_invalid=False,
    )
