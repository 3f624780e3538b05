"""Adaptive ASHA's arithmetic: brackets, their budgets, rung lengths, initial trials.

Everything is float64 arithmetic truncated to integers, as Determined computes it; in
particular the number of rungs uses ``int(log(L) / log(d))``, so ``log(1000) / log(10) =
2.9999999999999996`` truncates to 2. Powers ``d ** k`` with integer ``k`` multiply in the order of
Go's ``math.Pow`` (binary exponentiation), so a non-integral divisor rounds the same way.
"""

from __future__ import annotations

import math
from typing import Callable


def go_pow(base: float, exponent: int) -> float:
    """``math.Pow(base, float64(exponent))`` for an integer ``exponent >= 0``."""
    result, square, bits = 1.0, float(base), exponent
    while bits:
        if bits & 1:
            result *= square
        square *= square
        bits >>= 1
    return result


def max_rungs(length: int, max_trials: int, divisor: float, limit: int) -> int:
    """``min(max_rungs, int(ln L / ln d) + 1, int(ln T / ln d) + 1)``."""
    if length < 1 or max_trials < 1:
        raise ValueError(
            f"adaptive_asha needs a length (max_time or max_length) >= 1 and max_trials >= 1,"
            f" got length {length} and max_trials {max_trials}"
        )
    by_length = int(math.log(float(length)) / math.log(divisor)) + 1
    by_trials = int(math.log(float(max_trials)) / math.log(divisor)) + 1
    return min(limit, by_length, by_trials)


MODES: dict[str, Callable[[int], list[int]]] = {
    "conservative": lambda rungs: list(range(1, rungs + 1)),
    "standard": lambda rungs: list(range((rungs - 1) // 2 + 1, rungs + 1)),
    "aggressive": lambda rungs: [rungs],
}


def bracket_rungs(
    mode: str, length: int, max_trials: int, divisor: float, limit: int, given: list[int]
) -> list[int]:
    """Rungs per bracket, most rungs (most early stopping) first."""
    if given:
        rungs = list(given)
    else:
        if mode not in MODES:
            raise ValueError(f"unknown adaptive_asha mode {mode!r}; use one of {', '.join(MODES)}")
        rungs = MODES[mode](max_rungs(length, max_trials, divisor, limit))
    return sorted(rungs, reverse=True)


def bracket_max_trials(max_trials: int, divisor: float, brackets: list[int]) -> list[int]:
    """Trials per bracket, for roughly equal training budget per bracket; the remainder goes to
    the first bracket."""
    weights = [go_pow(divisor, rungs - 1) / float(rungs) for rungs in brackets]
    total = 0.0
    for weight in weights:
        total += weight
    trials = [max(int(weight / total * float(max_trials)), 1) for weight in weights]
    trials[0] += max(max_trials - sum(trials), 0)
    return trials


def bracket_max_concurrent_trials(
    max_concurrent_trials: int, divisor: float, bracket_trials: list[int]
) -> list[int]:
    """Concurrency per bracket: an even split (remainder to the first brackets), or when 0
    (unlimited) ``max(trials of the last bracket, int(divisor))`` for every bracket."""
    count = len(bracket_trials)
    if max_concurrent_trials == 0:
        return [max(bracket_trials[-1], int(divisor))] * count
    total = max(max_concurrent_trials, count)
    share, remainder = divmod(total, count)
    return [share + (1 if i < remainder else 0) for i in range(count)]


def rung_units(num_rungs: int, length: int, divisor: float) -> list[int]:
    """Rung k of n needs ``max(int(L / d ** (n - k - 1)), 1)`` units (absolute)."""
    return [max(int(float(length) / go_pow(divisor, num_rungs - k - 1)), 1)
            for k in range(num_rungs)]


def initial_trials(max_concurrent_trials: int, max_trials: int, divisor: float,
                   num_rungs: int) -> int:
    """Trials a bracket starts with: ``min(c, t)``, or when ``c == 0`` enough for one trial to
    reach the top rung, ``clamp(1, int(d ** (n - 1)), t)``."""
    if max_concurrent_trials > 0:
        return min(max_concurrent_trials, max_trials)
    return max(1, min(int(go_pow(divisor, num_rungs - 1)), max_trials))
