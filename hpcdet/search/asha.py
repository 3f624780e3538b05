"""Adaptive ASHA: several ASHA brackets run side by side as one search; async halving: one.

The flavour follows the config's shape: ``time_metric`` + ``max_time`` (0.38) run the
stopping-based brackets on validation reports; otherwise ``max_length`` (0.37) runs the
operation-driven brackets, promotion-based, or stopping-based when ``stop_once`` is set.
Each event goes to the bracket that created the trial; progress is the brackets' mean.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

from hpcdet.config.searcher import SearcherConfig
from hpcdet.search.asha_promoting import PromotingBracket, PromotingBracketConfig
from hpcdet.search.asha_stopping import StoppingBracket, StoppingBracketConfig
from hpcdet.search.base import Action, Create
from hpcdet.search.brackets import (
    bracket_max_concurrent_trials,
    bracket_max_trials,
    bracket_rungs,
    rung_units,
)
from hpcdet.search.method import SearchMethod, TrialFactory


class Tournament(SearchMethod):
    """Brackets sharing one trial factory; each trial belongs to the bracket that created it."""

    def __init__(self, brackets: list[SearchMethod]) -> None:
        self.brackets = brackets
        self._owner: dict[int, int] = {}

    def _claim(self, bracket: int, actions: list[Action]) -> list[Action]:
        for action in actions:
            if isinstance(action, Create):
                self._owner[action.request_id] = bracket
        return actions

    def initial(self) -> list[Action]:
        actions: list[Action] = []
        for i, bracket in enumerate(self.brackets):
            actions.extend(self._claim(i, bracket.initial()))
        return actions

    def validation(self, request_id: int, metrics: Mapping[str, Any]) -> list[Action]:
        i = self._owner[request_id]
        return self._claim(i, self.brackets[i].validation(request_id, metrics))

    def op_completed(self, request_id: int, length: int, metric: Any) -> list[Action]:
        i = self._owner[request_id]
        return self._claim(i, self.brackets[i].op_completed(request_id, length, metric))

    def exited(self, request_id: int, reason: str) -> list[Action]:
        i = self._owner[request_id]
        return self._claim(i, self.brackets[i].exited(request_id, reason))

    def progress(self) -> float:
        return sum(b.progress() for b in self.brackets) / len(self.brackets)

    def trial_count_bound(self) -> int:
        return sum(b.trial_count_bound() for b in self.brackets)

    def concurrency(self) -> int:
        return sum(b.concurrency() for b in self.brackets)


def _length(config: SearcherConfig) -> int:
    if config.time_metric is not None and config.max_time is not None:
        return config.max_time
    if config.max_length is not None:
        return config.max_length
    raise ValueError(
        f"the `{config.name}` searcher requires `max_time` and `time_metric` to be set"
        " (or max_length in 0.37-style configs)"
    )


def _stopping(config: SearcherConfig, trials: TrialFactory, units: list[int], max_trials: int,
              concurrency: int) -> SearchMethod:
    assert config.time_metric is not None  # _length() chose this flavour because it is set
    return StoppingBracket(trials, StoppingBracketConfig(
        metric=config.metric, smaller_is_better=config.smaller_is_better,
        time_metric=config.time_metric, units=units, max_trials=max_trials,
        max_concurrent_trials=concurrency, divisor=config.divisor,
    ))


def _promoting(config: SearcherConfig, trials: TrialFactory, units: list[int], max_trials: int,
            concurrency: int) -> SearchMethod:
    return PromotingBracket(trials, PromotingBracketConfig(
        metric=config.metric, smaller_is_better=config.smaller_is_better, units=units,
        max_trials=max_trials, max_concurrent_trials=concurrency, divisor=config.divisor,
        stop_once=config.stop_once,
    ))


BracketFactory = Callable[[SearcherConfig, TrialFactory, list[int], int, int], SearchMethod]
FLAVOURS: dict[bool, BracketFactory] = {True: _stopping, False: _promoting}


def uses_validations(config: SearcherConfig) -> bool:
    """0.38 shape: ASHA decides on validation reports carrying ``time_metric``."""
    return config.time_metric is not None and config.max_time is not None


def _brackets(config: SearcherConfig) -> list[int]:
    """Rungs per bracket: async_halving's one bracket has exactly ``num_rungs``."""
    assert config.max_trials is not None  # both searchers require it
    if config.name == "async_halving":
        assert config.num_rungs is not None  # required by the config
        return [config.num_rungs]
    return bracket_rungs(config.mode, _length(config), config.max_trials, config.divisor,
                         config.max_rungs, config.bracket_rungs)


def rung_lengths(config: SearcherConfig) -> list[int]:
    """Every rung of every bracket, in the searcher's time unit, shortest first; [] for a
    searcher that is neither adaptive_asha nor async_halving."""
    if config.name not in ("adaptive_asha", "async_halving") or config.max_trials is None:
        return []
    length = _length(config)
    return sorted({u for n in _brackets(config) for u in rung_units(n, length, config.divisor)})


def adaptive_asha(config: SearcherConfig, trials: TrialFactory) -> SearchMethod:
    if config.max_trials is None:
        raise ValueError("the adaptive_asha searcher needs max_trials")
    length, divisor = _length(config), config.divisor
    rungs = _brackets(config)
    max_trials = bracket_max_trials(config.max_trials, divisor, rungs)
    concurrency = bracket_max_concurrent_trials(config.max_concurrent_trials, divisor,
                                                max_trials)
    make = FLAVOURS[uses_validations(config)]
    return Tournament([
        make(config, trials, rung_units(n, length, divisor), t, c)
        for n, t, c in zip(rungs, max_trials, concurrency)
    ])


def async_halving(config: SearcherConfig, trials: TrialFactory) -> SearchMethod:
    """One bracket of ``num_rungs`` rungs with all of ``max_trials`` and
    ``max_concurrent_trials`` (0: as many as one trial at the top rung needs)."""
    if config.max_trials is None or config.num_rungs is None:
        raise ValueError("the async_halving searcher needs max_trials and num_rungs")
    units = rung_units(config.num_rungs, _length(config), config.divisor)
    make = FLAVOURS[uses_validations(config)]
    return make(config, trials, units, config.max_trials, config.max_concurrent_trials)
