"""Adaptive ASHA arithmetic: every unit-test vector of spec §4."""

from __future__ import annotations

import math

import pytest

from hpcdet.search.brackets import (
    bracket_max_concurrent_trials,
    bracket_max_trials,
    bracket_rungs,
    go_pow,
    initial_trials,
    max_rungs,
    rung_units,
)


@pytest.mark.parametrize(("max_trials", "divisor", "brackets", "expected"), [
    (20, 3, [3, 2, 1], [12, 5, 3]),
    (50, 3, [4, 3], [35, 15]),
    (50, 4, [3, 2], [37, 13]),
    (100, 4, [4, 3, 2], [70, 22, 8]),
])
def test_bracket_max_trials(
    max_trials: int, divisor: float, brackets: list[int], expected: list[int]
) -> None:
    assert bracket_max_trials(max_trials, divisor, brackets) == expected


@pytest.mark.parametrize(("concurrency", "divisor", "trials", "expected"), [
    (0, 3, [9, 3, 1], [3, 3, 3]),
    (11, 3, [9, 3, 1], [4, 4, 3]),
    (0, 4, [40, 10], [10, 10]),
    (2, 4, [5, 3, 1], [1, 1, 1]),  # raised to one per bracket
])
def test_bracket_max_concurrent_trials(
    concurrency: int, divisor: float, trials: list[int], expected: list[int]
) -> None:
    assert bracket_max_concurrent_trials(concurrency, divisor, trials) == expected


def brackets_of(mode: str, length: int, max_trials: int, concurrency: int,
                divisor: float = 4.0) -> list[tuple[int, int, int]]:
    rungs = bracket_rungs(mode, length, max_trials, divisor, 5, [])
    trials = bracket_max_trials(max_trials, divisor, rungs)
    return list(zip(rungs, trials, bracket_max_concurrent_trials(concurrency, divisor, trials)))


def test_bracket_examples() -> None:
    assert brackets_of("standard", 100, 10, 2) == [(2, 7, 1), (1, 3, 1)]
    assert brackets_of("conservative", 1000, 10, 5, divisor=3) == [(3, 7, 2), (2, 2, 2),
                                                                    (1, 1, 1)]
    assert brackets_of("aggressive", 1000, 100, 0, divisor=3) == [(5, 100, 100)]


def test_given_bracket_rungs_are_sorted_most_rungs_first() -> None:
    assert bracket_rungs("standard", 10, 10, 4.0, 5, [1, 3, 2]) == [3, 2, 1]


def test_float_log_hazards_truncate_like_float64() -> None:
    assert math.log(1000) / math.log(10) == 2.9999999999999996
    assert int(math.log(243) / math.log(3)) == 4
    # ln(1000)/ln(10) truncates to 2, so 3 rungs, not the 4 an integer log10 would give.
    assert max_rungs(1000, 10**6, 10.0, 10) == 3
    assert max_rungs(10**6, 1000, 10.0, 10) == 3
    # ln(243)/ln(3) = 4.999... truncates to 4, so 5 rungs, not 6.
    assert max_rungs(243, 10**6, 3.0, 10) == 5
    assert max_rungs(10**6, 243, 3.0, 10) == 5
    assert bracket_rungs("conservative", 243, 10**6, 3.0, 10, []) == [5, 4, 3, 2, 1]


def test_max_rungs_limits() -> None:
    assert max_rungs(100, 10, 4.0, 5) == 2  # by trials: int(ln 10 / ln 4) + 1
    assert max_rungs(100, 10**6, 4.0, 5) == 4  # by length: int(ln 100 / ln 4) + 1
    assert max_rungs(10**9, 10**9, 2.0, 5) == 5  # by max_rungs
    assert max_rungs(1, 1, 4.0, 5) == 1
    with pytest.raises(ValueError, match="length"):
        max_rungs(0, 10, 4.0, 5)


@pytest.mark.parametrize(("rungs", "length", "divisor", "expected"), [
    (3, 9, 3, [1, 3, 9]),
    (4, 10, 2, [1, 2, 5, 10]),
    (3, 900, 3, [100, 300, 900]),
    (3, 576000, 3, [64000, 192000, 576000]),  # records
    (3, 12, 3, [1, 4, 12]),  # epochs
    (2, 100, 4, [25, 100]),
    (3, 2, 4, [1, 1, 2]),  # never below 1
    (1, 7, 4, [7]),
])
def test_rung_units(rungs: int, length: int, divisor: float, expected: list[int]) -> None:
    assert rung_units(rungs, length, divisor) == expected


def test_initial_trials_per_bracket() -> None:
    assert initial_trials(8, 7, 4.0, 2) == 7  # min(c, t)
    assert initial_trials(2, 7, 4.0, 2) == 2
    assert initial_trials(0, 100, 3.0, 4) == 27  # clamp(1, d^(n-1), t)
    assert initial_trials(0, 10, 3.0, 4) == 10
    assert initial_trials(0, 10, 3.0, 1) == 1


def test_go_pow_multiplies_by_binary_exponentiation() -> None:
    for base in (2.0, 3.0, 4.0, 10.0):
        for exponent in range(8):
            assert go_pow(base, exponent) == base**exponent
    x = 3.3
    assert go_pow(x, 3) == x * (x * x)
    assert go_pow(x, 5) == x * ((x * x) * (x * x))
