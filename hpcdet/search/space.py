"""A hyperparameter space: sampling one point, and the points of a grid.

The space is the normalised ``hyperparameters`` section: every leaf is ``{"type": const | int |
double | log | categorical, ...}`` and a mapping without ``type`` is a nested group. Names are
visited in sorted order and nested groups depth first, also sorted (Determined iterates nested
groups in Go map order, which is not reproducible; sorted order is the deterministic choice).
Values are deep-copied, so a point never shares a mutable value with the space.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any, Callable

from hpcdet.config.hyperparameters import grid_axis_length
from hpcdet.search.rng import MT19937

Route = tuple[str, ...]
Axis = tuple[Route, list[Any]]


def _is_group(hp: Any) -> bool:
    return isinstance(hp, Mapping) and "type" not in hp


# ---- sampling (random search, ASHA) -----------------------------------------------------------


def _sample_int(hp: Mapping[str, Any], rng: MT19937) -> int:
    low, high = int(hp["minval"]), int(hp["maxval"])
    return low + rng.intn(high - low + 1)


def _sample_double(hp: Mapping[str, Any], rng: MT19937) -> float:
    return rng.uniform(float(hp["minval"]), float(hp["maxval"]))


def _sample_log(hp: Mapping[str, Any], rng: MT19937) -> float:
    exponent = rng.uniform(float(hp["minval"]), float(hp["maxval"]))
    return math.pow(float(hp["base"]), exponent)


def _sample_categorical(hp: Mapping[str, Any], rng: MT19937) -> Any:
    vals = hp["vals"]
    return copy.deepcopy(vals[rng.intn(len(vals))])


def _sample_const(hp: Mapping[str, Any], rng: MT19937) -> Any:
    return copy.deepcopy(hp["val"])


_SAMPLERS: dict[str, Callable[[Mapping[str, Any], MT19937], Any]] = {
    "const": _sample_const,
    "int": _sample_int,
    "double": _sample_double,
    "log": _sample_log,
    "categorical": _sample_categorical,
}


def sample(space: Mapping[str, Any], rng: MT19937) -> dict[str, Any]:
    """One point: int ``minval + intn(maxval - minval + 1)``, double ``uniform(minval,
    maxval)``, log ``base ** uniform(minval, maxval)``, categorical ``vals[intn(len(vals))]``."""
    point: dict[str, Any] = {}
    for name in sorted(space):
        hp = space[name]
        if _is_group(hp):
            point[name] = sample(hp, rng)
        elif isinstance(hp, Mapping):
            point[name] = _SAMPLERS[hp["type"]](hp, rng)
        else:  # not normalised: a bare value is an implicit const
            point[name] = copy.deepcopy(hp)
    return point


# ---- grid ---------------------------------------------------------------------------------------


def round_half_away(value: float) -> int:
    """Go's ``math.Round``: halves round away from zero (Python's ``round`` rounds to even)."""
    fraction, whole = math.modf(value)
    if abs(fraction) >= 0.5:
        whole += math.copysign(1.0, value)
    return int(whole)


def _count(hp: Mapping[str, Any]) -> int:
    count = hp.get("count")
    if count is None:
        raise ValueError(
            "grid search is in use but count was not provided; add count: <number of grid"
            f" points> to every int, double and log hyperparameter (got {dict(hp)})"
        )
    return int(count)


def _int_axis(hp: Mapping[str, Any]) -> list[Any]:
    low, high = int(hp["minval"]), int(hp["maxval"])
    _count(hp)
    count = grid_axis_length(hp)
    if count == 1:
        return [round_half_away(float(low + high) / 2.0)]
    # Integer product first, then one float division (as Determined computes it).
    return [round_half_away(float(low) + float(i * (high - low)) / float(count - 1))
            for i in range(count)]


def _double_points(hp: Mapping[str, Any]) -> list[float]:
    low, high, count = float(hp["minval"]), float(hp["maxval"]), _count(hp)
    if count == 1:
        return [(low + high) / 2.0]
    return [low + float(i) * (high - low) / float(count - 1) for i in range(count)]


def _double_axis(hp: Mapping[str, Any]) -> list[Any]:
    return list(_double_points(hp))


def _log_axis(hp: Mapping[str, Any]) -> list[Any]:
    base = float(hp["base"])
    return [math.pow(base, exponent) for exponent in _double_points(hp)]


_AXES: dict[str, Callable[[Mapping[str, Any]], list[Any]]] = {
    "const": lambda hp: [hp["val"]],
    "int": _int_axis,
    "double": _double_axis,
    "log": _log_axis,
    "categorical": lambda hp: list(hp["vals"]),
}


def grid_axes(space: Mapping[str, Any], route: Route = ()) -> list[Axis]:
    """One axis per leaf, as (route, values): sorted names, nested groups depth first; an empty
    group is one axis with the single value ``{}``."""
    axes: list[Axis] = []
    for name in sorted(space):
        hp, path = space[name], (*route, name)
        if _is_group(hp):
            axes.extend(grid_axes(hp, path) if hp else [(path, [{}])])
        elif isinstance(hp, Mapping):
            axes.append((path, _AXES[hp["type"]](hp)))
        else:
            axes.append((path, [hp]))
    return axes


def _put(point: dict[str, Any], route: Route, value: Any) -> None:
    for key in route[:-1]:
        point = point.setdefault(key, {})
    point[route[-1]] = copy.deepcopy(value)


class Grid:
    """The Cartesian product of the axes, the first axis varying slowest, one point at a time:
    a grid is never materialised, only the point asked for."""

    def __init__(self, space: Mapping[str, Any]) -> None:
        self.axes = grid_axes(space)
        self.size = math.prod(len(values) for _, values in self.axes)

    def __len__(self) -> int:
        return self.size

    def point(self, index: int) -> dict[str, Any]:
        if not 0 <= index < self.size:
            raise IndexError(f"grid point {index} of a grid of {self.size}")
        point: dict[str, Any] = {}
        chosen = []
        for _, values in reversed(self.axes):
            index, digit = divmod(index, len(values))
            chosen.append(values[digit])
        for (route, _), value in zip(self.axes, reversed(chosen)):
            _put(point, route, value)
        return point


def grid_points(space: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every point of the grid, in product order. A space without hyperparameters is one empty
    point."""
    grid = Grid(space)
    return [grid.point(i) for i in range(grid.size)]
