"""The ``hyperparameters`` section: validation and normalisation to Determined's expanded form.

A non-mapping value is an implicit ``const``; a mapping without ``type`` is a nested group of
hyperparameters; otherwise ``type`` is one of const, int, double, log, categorical. The
normalised form writes every leaf as ``{"type": ..., ...}`` with optional fields filled in.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from hpcdet.config.schema import (
    FINITE_HINT,
    FLOAT_MAX,
    INT64_HINT,
    At,
    KeyPath,
    check_storable,
    did_you_mean,
    is_finite_number,
    is_int,
    is_int64,
    is_number,
    show,
)

HP_TYPES = ("const", "int", "double", "log", "categorical")
_FIELDS = {
    "const": ("type", "val"),
    "int": ("type", "minval", "maxval", "count"),
    "double": ("type", "minval", "maxval", "count"),
    "log": ("type", "minval", "maxval", "base", "count"),
    "categorical": ("type", "vals"),
}
_MAX_NESTING = 32
# The most trials one experiment may ask for (max_trials, grid points, count): each trial is a
# row, a run directory and a job-array task, and the daemon plans them on one thread.
MAX_TRIALS = 100_000


def check_hyperparameters(value: Any, at: At) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        at.error(
            f"must be a mapping of hyperparameter names to values, got {show(value)};"
            " e.g. hyperparameters: {lr: {type: log, minval: -4, maxval: -1, base: 10}}"
        )
        return {}
    return _check_group(value, at, 0)


def _check_group(group: dict[str, Any], at: At, depth: int) -> dict[str, Any]:
    if depth > _MAX_NESTING:
        at.error("hyperparameters nest too deeply")
        return {}
    return {name: _check_one(hp, at / name, depth) for name, hp in group.items()}


def _check_one(hp: Any, at: At, depth: int) -> Any:
    if not isinstance(hp, dict):
        check_storable(hp, at)
        return {"type": "const", "val": hp}
    if "type" not in hp:
        return _check_group(hp, at, depth + 1)
    kind = hp["type"]
    if kind not in HP_TYPES:
        hint = did_you_mean(str(kind), HP_TYPES) if isinstance(kind, str) else ""
        at_type = at / "type"
        at_type.error(
            f"must be one of {', '.join(HP_TYPES)}, got {show(kind)}"
            + (f"; {hint}" if hint.startswith("did") else "")
        )
        return dict(hp)
    for key in hp:
        if key == "count" and kind in ("categorical", "const"):
            takes = "every value of its vals" if kind == "categorical" else "its one value"
            (at / "count").error(
                f"a {kind} hyperparameter takes no count (count is for int, double and log"
                f" ones; a grid takes {takes}); remove it")
        elif key not in _FIELDS[kind]:
            (at / str(key)).error(
                f"unknown key for a {kind} hyperparameter; {did_you_mean(str(key), _FIELDS[kind])}"
            )
    checker = {
        "const": _const,
        "int": _int,
        "double": _double,
        "log": _log,
        "categorical": _categorical,
    }[kind]
    return checker(hp, at)


def _const(hp: dict[str, Any], at: At) -> dict[str, Any]:
    if "val" not in hp:
        (at / "val").error("a const hyperparameter needs val, e.g. {type: const, val: 0.1}")
    check_storable(hp.get("val"), at / "val")
    return {"type": "const", "val": hp.get("val")}


def _count(hp: dict[str, Any], at: At) -> Any:
    count = hp.get("count")
    if count is not None and not (is_int(count) and 1 <= count <= MAX_TRIALS):
        (at / "count").error(
            f"must be an integer between 1 and {MAX_TRIALS} (grid points), got {show(count)}"
        )
        return None
    return count


def _range(hp: dict[str, Any], at: At, want_int: bool) -> tuple[Any, Any]:
    kind = "an integer" if want_int else "a number"
    is_kind, in_range = (is_int, is_int64) if want_int else (is_number, is_finite_number)
    too_big = f"is too large: {INT64_HINT}" if want_int else FINITE_HINT
    bounds = []
    for key in ("minval", "maxval"):
        bound = hp.get(key)
        if bound is None:
            (at / key).error(f"is required: {kind}, e.g. minval: 1, maxval: 10")
        elif not is_kind(bound) or not in_range(bound):
            problem = f"must be {kind}" if not is_kind(bound) else too_big
            (at / key).error(f"{problem}, got {show(bound)}")
            bound = None
        bounds.append(bound)
    low, high = bounds
    if low is not None and high is not None and not low < high:
        (at / "minval").error(
            f"minval ({low}) must be less than maxval ({high}); for a fixed value"
            f" use {{type: const, val: {low}}}"
        )
        return None, None
    return low, high


def _int(hp: dict[str, Any], at: At) -> dict[str, Any]:
    low, high = _range(hp, at, want_int=True)
    return {"type": "int", "minval": low, "maxval": high, "count": _count(hp, at)}


def _double(hp: dict[str, Any], at: At) -> dict[str, Any]:
    low, high = _range(hp, at, want_int=False)
    return {"type": "double", "minval": low, "maxval": high, "count": _count(hp, at)}


def _log(hp: dict[str, Any], at: At) -> dict[str, Any]:
    low, high = _range(hp, at, want_int=False)
    base = hp.get("base")
    if base is None:
        (at / "base").error("is required for a log hyperparameter, e.g. base: 10")
    elif not (is_number(base) and base > 0):
        (at / "base").error(f"must be a number > 0, got {show(base)}")
    elif not is_finite_number(base):
        (at / "base").error(f"{FINITE_HINT}, got {show(base)}")
    elif low is not None and high is not None:
        _check_log_values(float(base), low, high, at)
    return {"type": "log", "minval": low, "maxval": high, "base": base, "count": _count(hp, at)}


def _check_log_values(base: float, low: float, high: float, at: At) -> None:
    """Values are ``base ** exponent`` for exponents in [minval, maxval]: both ends (and so
    everything between) must be finite numbers, or sampling fails when the experiment starts."""
    for key, exponent in (("minval", low), ("maxval", high)):
        try:
            value = math.pow(base, exponent)
        except OverflowError:
            value = math.inf
        if not value <= FLOAT_MAX:
            (at / key).error(
                f"{base:g} ** {exponent:g} is too large for a number (the values of a log"
                f" hyperparameter are base ** minval .. base ** maxval, at most {FLOAT_MAX:g});"
                " use exponents, e.g. minval: -5, maxval: -1 for 1e-05 .. 0.1 with base: 10"
            )
            return


def _categorical(hp: dict[str, Any], at: At) -> dict[str, Any]:
    vals = hp.get("vals")
    if not isinstance(vals, list) or not vals:
        (at / "vals").error(
            f"must be a non-empty list of choices, got {show(vals)}; e.g. vals: [32, 64, 128]"
        )
        vals = []
    check_storable(vals, at / "vals")
    return {"type": "categorical", "vals": vals}


def iter_leaves(hparams: dict[str, Any], prefix: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    """Every hyperparameter of a normalised section with its path, nested groups flattened."""
    for name, hp in hparams.items():
        if isinstance(hp, dict) and hp.get("type") in HP_TYPES:
            yield (*prefix, name), hp
        elif isinstance(hp, dict):
            yield from iter_leaves(hp, (*prefix, name))


def grid_axis_length(hp: Mapping[str, Any]) -> int:
    """How many values a normalised leaf takes in a grid (an int range has at most one point
    per integer)."""
    kind = hp["type"]
    if kind == "categorical":
        return len(hp["vals"])
    if kind == "const":
        return 1
    count = int(hp["count"])
    return min(count, int(hp["maxval"]) - int(hp["minval"]) + 1) if kind == "int" else count


def check_grid_counts(hparams: dict[str, Any], at: At) -> None:
    """Grid search needs ``count`` on every int, double and log hyperparameter, and a grid of
    at most ``MAX_TRIALS`` points."""
    for path, hp in iter_leaves(hparams):
        if hp["type"] in ("int", "double", "log") and hp.get("count") is None:
            where = at
            for part in path:
                where = where / part
            if (where / "count").path in at.problems.paths:
                continue  # given, but not a valid count: said already
            (where / "count").error(
                f"grid search is in use but this {hp['type']} hyperparameter has no count; add"
                " count: <number of grid points> to it"
            )
    if at.problems:
        return  # a leaf that failed validation has no size yet
    size = 1
    for _, hp in iter_leaves(hparams):
        size = min(size * grid_axis_length(hp), MAX_TRIALS + 1)
    if size > MAX_TRIALS:
        at.error(
            f"the grid has more than {MAX_TRIALS} points (the product of every count and"
            " categorical list), more trials than one experiment may run; lower the counts"
            " or use the random or adaptive_asha searcher"
        )
