"""Sampling one point, and grid axes and points (spec §4 random and grid)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from hpcdet.search.rng import MT19937
from hpcdet.search.space import grid_axes, grid_points, round_half_away, sample


def const(val: Any) -> dict[str, Any]:
    return {"type": "const", "val": val}


def int_hp(lo: int, hi: int, count: int | None = None) -> dict[str, Any]:
    return {"type": "int", "minval": lo, "maxval": hi, "count": count}


def double_hp(lo: float, hi: float, count: int | None = None) -> dict[str, Any]:
    return {"type": "double", "minval": lo, "maxval": hi, "count": count}


def log_hp(lo: float, hi: float, base: float, count: int | None = None) -> dict[str, Any]:
    return {"type": "log", "minval": lo, "maxval": hi, "base": base, "count": count}


def cat(*vals: Any) -> dict[str, Any]:
    return {"type": "categorical", "vals": list(vals)}


SPACE = {
    "units": int_hp(1, 8),
    "dropout": double_hp(0, 0.5),
    "lr": log_hp(-4, -1, 10),
    "act": cat("relu", "tanh", "gelu"),
    "opt": {"momentum": double_hp(0.8, 0.99), "name": const("sgd"), "beta": int_hp(-3, 3)},
    "epochs": const(3),
}


def test_sample_draws_in_sorted_order_depth_first() -> None:
    rng, ref = MT19937(5), MT19937(5)
    point = sample(SPACE, rng)
    # act, dropout, epochs, lr, opt.{beta, momentum, name}, units
    expected = {
        "act": ["relu", "tanh", "gelu"][ref.intn(3)],
        "dropout": ref.uniform(0.0, 0.5),
        "epochs": 3,
        "lr": math.pow(10.0, ref.uniform(-4.0, -1.0)),
        "opt": {"beta": -3 + ref.intn(7), "momentum": ref.uniform(0.8, 0.99), "name": "sgd"},
        "units": 1 + ref.intn(8),
    }
    assert point == expected
    assert list(point) == sorted(point) and list(point["opt"]) == ["beta", "momentum", "name"]
    assert rng.next_uint32() == ref.next_uint32()  # nothing else was drawn


def test_int_sampling_is_inclusive_and_types_are_kept() -> None:
    rng = MT19937(0)
    values = {sample({"k": int_hp(1, 3)}, rng)["k"] for _ in range(200)}
    assert values == {1, 2, 3}
    point = sample(SPACE, rng)
    assert isinstance(point["units"], int) and isinstance(point["dropout"], float)


def test_sample_copies_mutable_values() -> None:
    space = {"layers": const([1, 2]), "c": cat({"a": 1})}
    point = sample(space, MT19937(0))
    point["layers"].append(3)
    point["c"]["a"] = 2
    assert space["layers"]["val"] == [1, 2] and space["c"]["vals"] == [{"a": 1}]


def test_sample_accepts_bare_values_as_const() -> None:
    assert sample({"a": 4, "g": {"b": "x"}}, MT19937(0)) == {"a": 4, "g": {"b": "x"}}


@pytest.mark.parametrize(("value", "rounded"), [
    (2.5, 3), (-2.5, -3), (0.5, 1), (-0.5, -1), (1.4999999999999998, 1),
    (0.49999999999999994, 0), (3.0, 3), (-7.2, -7), (-7.6, -8),
])
def test_round_half_away_from_zero(value: float, rounded: int) -> None:
    assert round_half_away(value) == rounded


def axis(hp: dict[str, Any]) -> list[Any]:
    ((_, values),) = grid_axes({"x": hp})
    return values


def test_int_axes_round_half_away_from_zero() -> None:
    assert axis(int_hp(0, 5, 3)) == [0, 3, 5]  # 2.5 -> 3 (Python's round gives 2)
    assert axis(int_hp(-5, 0, 3)) == [-5, -3, 0]  # -2.5 -> -3
    assert axis(int_hp(1, 4, 1)) == [3]  # (1 + 4) / 2 = 2.5 -> 3
    assert axis(int_hp(-4, -1, 1)) == [-3]
    assert axis(int_hp(1, 10, 4)) == [1, 4, 7, 10]
    assert axis(int_hp(0, 10, 4)) == [0, 3, 7, 10]  # 3.33 -> 3, 6.67 -> 7


def test_int_axis_count_is_clamped_to_the_range() -> None:
    assert axis(int_hp(1, 3, 10)) == [1, 2, 3]
    assert axis(int_hp(5, 6, 2)) == [5, 6]


def test_double_log_categorical_const_axes() -> None:
    assert axis(double_hp(0, 1, 3)) == [0.0, 0.5, 1.0]
    assert axis(double_hp(0, 1, 1)) == [0.5]
    assert axis(double_hp(-1, 1, 5)) == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert axis(log_hp(-3, -1, 10, 3)) == [math.pow(10, -3), math.pow(10, -2), math.pow(10, -1)]
    assert axis(log_hp(-3, -1, 10, 1)) == [math.pow(10, -2)]
    assert axis(log_hp(0, 4, 2, 3)) == [1.0, 4.0, 16.0]
    assert axis(cat("b", "a", 3)) == ["b", "a", 3]
    assert axis(const({"k": 1})) == [{"k": 1}]


def test_grid_axes_nested_depth_first_sorted() -> None:
    space = {
        "z": cat(1, 2),
        "g": {"b": const("x"), "a": {"y": int_hp(0, 2, 3), "e": {}}},
        "a": const(0),
    }
    assert grid_axes(space) == [
        (("a",), [0]),
        (("g", "a", "e"), [{}]),
        (("g", "a", "y"), [0, 1, 2]),
        (("g", "b"), ["x"]),
        (("z",), [1, 2]),
    ]


def test_grid_points_first_axis_slowest_and_nested_values_placed() -> None:
    space = {"b": cat("x", "y"), "a": cat(1, 2), "g": {"d": double_hp(0, 1, 2)}}
    assert grid_points(space) == [
        {"a": 1, "b": "x", "g": {"d": 0.0}},
        {"a": 1, "b": "x", "g": {"d": 1.0}},
        {"a": 1, "b": "y", "g": {"d": 0.0}},
        {"a": 1, "b": "y", "g": {"d": 1.0}},
        {"a": 2, "b": "x", "g": {"d": 0.0}},
        {"a": 2, "b": "x", "g": {"d": 1.0}},
        {"a": 2, "b": "y", "g": {"d": 0.0}},
        {"a": 2, "b": "y", "g": {"d": 1.0}},
    ]


def test_grid_points_edge_cases() -> None:
    assert grid_points({}) == [{}]
    assert grid_points({"g": {}}) == [{"g": {}}]
    space = {"c": const([1]), "d": cat([2])}
    points = grid_points(space)
    points[0]["c"].append(9)
    points[0]["d"].append(9)
    assert grid_points(space) == [{"c": [1], "d": [2]}]


def test_grid_needs_counts() -> None:
    with pytest.raises(ValueError, match="grid search is in use but count was not provided"):
        grid_points({"lr": double_hp(0, 1)})
