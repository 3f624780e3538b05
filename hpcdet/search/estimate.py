"""The most a search can run, before it is created: its trials and their lengths as the
searcher's plan makes them, in the searcher's unit of length (`experiment create` turns them
into slot-hours with the speed of similar trials, ``hpcdet.views.estimate``).

ASHA's plan: each bracket starts its trials, and of the trials that reach a rung, one in
``divisor`` (at least one) goes on to the next; a trial runs its rung's length in all. That is
the work the searcher plans; a search whose validations come in ever better order can continue
more trials (0.38's stopping flavour), so it is an estimate, not a bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpcdet.search.asha import _brackets, _length
from hpcdet.search.brackets import bracket_max_trials, rung_units
from hpcdet.search.space import grid_points

if TYPE_CHECKING:
    from hpcdet.config.searcher import SearcherConfig


@dataclass(frozen=True)
class Plan:
    trials: int  # the most trials it creates
    length: int | None  # the most one trial runs, in ``unit``; None: the trial decides
    unit: str  # "batches", "epochs", "records", a time_metric's name, or "units"
    units: int | None  # every trial's length summed as the plan runs them


def plan(searcher: SearcherConfig, hyperparameters: dict[str, Any]) -> Plan:
    """The searcher's plan for a validated config's searcher and hyperparameters."""
    unit = searcher.max_length_unit or searcher.time_metric or "units"
    name = searcher.name
    if name in ("adaptive_asha", "async_halving") and searcher.max_trials is not None:
        longest = _length(searcher)
        brackets = _brackets(searcher)
        trials = (bracket_max_trials(searcher.max_trials, searcher.divisor, brackets)
                  if name == "adaptive_asha" else [searcher.max_trials])
        units = sum(_bracket_units(rung_units(n, longest, searcher.divisor), t,
                                   searcher.divisor) for n, t in zip(brackets, trials))
        return Plan(sum(trials), longest, unit, units)
    length = searcher.max_time if searcher.time_metric else searcher.max_length
    if name == "grid":
        count = len(grid_points(hyperparameters))
        count = min(count, searcher.max_trials) if searcher.max_trials else count
    elif name == "single":
        count = 1
    else:
        count = searcher.max_trials or 1
    return Plan(count, length, unit, None if length is None else count * length)


def _bracket_units(rungs: list[int], trials: int, divisor: float) -> int:
    total, reached, done = 0, trials, 0
    for length in rungs:
        total += reached * (length - done)
        done = length
        reached = max(1, int(reached / divisor))
    return total
