"""Grid search: one trial per grid point.

Points are taken from the END of the point list (Determined pops them), each computed when
its trial is created, so trials are created in the reverse of the product order:
``min(len(grid), max_concurrent_trials)`` at the start (all when 0) and one more each time a
trial becomes final. Invalid-hyperparameter trials are not replaced: a grid point is tried once.
0.37-style configs (``max_length`` set) give each trial
``ValidateAfter(max_length)`` and ``Close`` with its ``Create``.
"""

from __future__ import annotations

from hpcdet.config.hyperparameters import MAX_TRIALS
from hpcdet.config.searcher import SearcherConfig
from hpcdet.search.base import Action, Close, ValidateAfter
from hpcdet.search.method import SearchMethod, TrialFactory, initial_count
from hpcdet.search.space import Grid


class GridSearch(SearchMethod):
    def __init__(
        self, trials: TrialFactory, *, max_concurrent_trials: int, max_length: int | None
    ) -> None:
        self._trials = trials
        self._grid = Grid(trials.space)
        if self._grid.size > MAX_TRIALS:
            raise ValueError(
                f"the grid has {self._grid.size} points, more than the {MAX_TRIALS} trials one"
                " experiment may run"
            )
        self._size = self._grid.size
        self._remaining = self._size
        self._max_concurrent = max_concurrent_trials
        self._max_length = max_length
        self._done = 0

    def _create_next(self) -> list[Action]:
        if not self._remaining:
            return []
        self._remaining -= 1
        create = self._trials.create(self._grid.point(self._remaining))
        if self._max_length is None:
            return [create]
        rid = create.request_id
        return [create, ValidateAfter(rid, self._max_length), Close(rid)]

    def initial(self) -> list[Action]:
        actions: list[Action] = []
        for _ in range(initial_count(self._size, self._max_concurrent)):
            actions.extend(self._create_next())
        return actions

    def exited(self, request_id: int, reason: str) -> list[Action]:
        self._done += 1
        return self._create_next()

    def progress(self) -> float:
        return min(1.0, self._done / self._size)

    def trial_count_bound(self) -> int:
        return self._size

    def concurrency(self) -> int:
        return initial_count(self._size, self._max_concurrent)


def grid_search(config: SearcherConfig, trials: TrialFactory) -> SearchMethod:
    return GridSearch(
        trials, max_concurrent_trials=config.max_concurrent_trials, max_length=config.max_length
    )
