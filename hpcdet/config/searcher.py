"""The ``searcher`` section: one schema per search method, as in Determined's ``searcher.json``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpcdet.config.hyperparameters import MAX_TRIALS
from hpcdet.config.schema import (
    INT64_HINT,
    At,
    Bool,
    Custom,
    Int,
    Number,
    Spec,
    Str,
    check_mapping,
    did_you_mean,
    is_int,
    is_int64,
    show,
)

SEARCHERS = ("single", "random", "grid", "adaptive_asha", "async_halving")
LENGTH_UNITS = ("batches", "records", "epochs")
_GONE = {
    "custom": "the 'custom' searcher has been removed and is not valid for new experiments",
    "pbt": "the 'pbt' searcher has been removed from Determined and is not supported",
    "sync_halving": "the 'sync_halving' searcher has been removed; use adaptive_asha",
    "adaptive": "the 'adaptive' searcher has been removed; use adaptive_asha",
    "adaptive_simple": "the 'adaptive_simple' searcher has been removed; use adaptive_asha",
}


def check_length(value: Any, at: At, minimum_units: int = 1) -> Any:
    """A plain integer >= 0, or exactly one of ``{batches|records|epochs: int}``."""
    if value is None or (is_int64(value) and value >= 0):
        return value
    if is_int(value) and value > 0:
        at.error(f"is too large: {INT64_HINT}, got {show(value)}")
        return None
    example = "e.g. max_length: 100 or max_length: {epochs: 20}"
    if not isinstance(value, dict):
        at.error(f"must be an integer >= 0 or one of {{batches|records|epochs: N}}; {example},"
                 f" got {show(value)}")
        return None
    units = list(value)
    if len(units) != 1 or units[0] not in LENGTH_UNITS:
        close = did_you_mean(units[0], LENGTH_UNITS) if len(units) == 1 else ""
        hint = f" ({close})" if close.startswith("did") else ""
        got = ", ".join(map(str, units)) or "none"
        at.error(f"must have exactly one key of batches, records, epochs{hint}; {example};"
                 f" got keys: {got}")
        return None
    amount = value[units[0]]
    if not (is_int(amount) and amount >= minimum_units):
        (at / units[0]).error(f"must be an integer >= {minimum_units}, got {show(amount)}")
        return None
    if not is_int64(amount):
        (at / units[0]).error(f"is too large: {INT64_HINT}, got {show(amount)}")
        return None
    return dict(value)


# ASHA's arithmetic raises the divisor to the number of rungs and keeps one list per rung and
# per bracket; these bounds keep every power finite and every list short.
MAX_RUNGS = 32
MAX_DIVISOR = 1e6


def _bracket_rungs(value: Any, at: At) -> list[int]:
    if value is None:
        return []
    valid = isinstance(value, list) and len(value) <= MAX_RUNGS
    if not valid or not all(is_int(v) and 1 <= v <= MAX_RUNGS for v in value):
        at.error(
            f"must be a list of at most {MAX_RUNGS} integers between 1 and {MAX_RUNGS} (rungs per"
            f" bracket), e.g. [3, 2, 1]; got {show(value)}"
        )
        return []
    return list(value)


_COMMON: dict[str, Spec] = {
    "name": Str(),
    "metric": Str(),
    "smaller_is_better": Bool(True),
    "source_trial_id": Int(None, minimum=1),
    "source_checkpoint_uuid": Str(None),
    "max_length": Custom(check_length),
}
_CONCURRENCY: dict[str, Spec] = {
    "max_concurrent_trials": Int(16, minimum=0, maximum=MAX_TRIALS),
}
_TRIALS: dict[str, Spec] = {"max_trials": Int(None, minimum=1, maximum=MAX_TRIALS)}
_ASHA: dict[str, Spec] = {
    "time_metric": Str(None),
    "max_time": Int(None, minimum=1),
    "mode": Str("standard", choices=("standard", "aggressive", "conservative")),
    "divisor": Number(4.0, above=1, maximum=MAX_DIVISOR),
    "max_rungs": Int(5, minimum=1, maximum=MAX_RUNGS),
    "bracket_rungs": Custom(_bracket_rungs),
    "stop_once": Bool(False),
}
_SPECS: dict[str, dict[str, Spec]] = {
    "single": _COMMON,
    "random": {**_COMMON, **_TRIALS, **_CONCURRENCY},
    "grid": {**_COMMON, **_CONCURRENCY},
    "adaptive_asha": {**_COMMON, **_TRIALS, **_CONCURRENCY, **_ASHA},
    # One ASHA bracket of exactly num_rungs rungs (adaptive_asha runs several, derived).
    "async_halving": {**_COMMON, **_TRIALS, **_CONCURRENCY, "num_rungs": Int(
        None, minimum=1, maximum=MAX_RUNGS), **{k: _ASHA[k] for k in (
            "time_metric", "max_time", "divisor", "stop_once")}},
}
_METRIC_HINT = (
    "is required: the name of the validation metric to optimise, e.g. metric: validation_loss"
)
_EXAMPLE = "e.g. searcher: {name: single, metric: validation_loss}"


def check_searcher(value: Any, at: At) -> dict[str, Any] | None:
    if value is None:
        at.error(f"is required; {_EXAMPLE}")
        return None
    if not isinstance(value, dict):
        at.error(f"must be a mapping, {_EXAMPLE}; got {show(value)}")
        return None
    name = value.get("name")
    name = name if isinstance(name, str) else repr(name)
    if name in _GONE:
        (at / "name").error(_GONE[name])
        return None
    if name not in _SPECS:
        hint = did_you_mean(name, SEARCHERS)
        (at / "name").error(
            f"must be one of {', '.join(SEARCHERS)}, got {show(value.get('name'))}"
            + (f"; {hint}" if hint.startswith("did") else "")
        )
        return None
    required = {"metric": _METRIC_HINT}
    if name in ("random", "adaptive_asha", "async_halving"):
        required["max_trials"] = (
            f"is required for the {name} searcher: an integer between 1 and {MAX_TRIALS}"
        )
    if name == "async_halving":
        required["num_rungs"] = (
            f"is required for the async_halving searcher: the number of rungs, 1 to {MAX_RUNGS}"
            ", e.g. num_rungs: 3"
        )
    out = check_mapping(value, at, _SPECS[name], required=required)
    if name in ("adaptive_asha", "async_halving"):
        _check_asha_length(name, out, value.get("max_length") is not None, at)
    return out


def _check_asha_length(name: str, out: dict[str, Any], gave_length: bool, at: At) -> None:
    # 0.38 configs give time_metric + max_time; 0.37 configs give max_length. Accept either.
    has_time = out["time_metric"] is not None, out["max_time"] is not None
    if any(has_time) and not all(has_time):
        missing = "time_metric" if not has_time[0] else "max_time"
        (at / missing).error(
            f"the `{name}` searcher requires `max_time` and `time_metric` to be set;"
            f" add {missing}"
        )
    elif not any(has_time) and not gave_length:
        at.error(
            f"the `{name}` searcher requires `max_time` and `time_metric` to be set"
            " (e.g. time_metric: batches, max_time: 100), or max_length in 0.37-style configs"
        )
    elif not any(has_time) and out["max_length"] == 0:
        # Rung lengths divide max_length: zero leaves ASHA nothing to train or rank.
        (at / "max_length").error(
            f"must be at least 1 for the {name} searcher (the length of a trial that"
            " reaches the top rung), e.g. max_length: {batches: 1000}"
        )


@dataclass(frozen=True)
class SearcherConfig:
    """The searcher with every default filled in.

    ``single`` is random search with ``max_trials = max_concurrent_trials = 1``; ``grid`` has no
    ``max_trials`` (None): its size is the grid's. ``max_length`` is the number of units and
    ``max_length_unit`` the unit (``None`` for a plain integer).
    """

    name: str
    metric: str
    smaller_is_better: bool = True
    source_trial_id: int | None = None
    source_checkpoint_uuid: str | None = None
    max_length: int | None = None
    max_length_unit: str | None = None
    max_trials: int | None = None
    max_concurrent_trials: int = 16
    time_metric: str | None = None
    max_time: int | None = None
    mode: str = "standard"
    divisor: float = 4.0
    max_rungs: int = 5
    bracket_rungs: list[int] = field(default_factory=list)
    stop_once: bool = False
    num_rungs: int | None = None

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> SearcherConfig:
        length = raw.get("max_length")
        unit: str | None = None
        if isinstance(length, dict):
            unit, length = next(iter(length.items()))
        single = raw["name"] == "single"
        return cls(
            name=raw["name"],
            metric=raw["metric"],
            smaller_is_better=raw["smaller_is_better"],
            source_trial_id=raw["source_trial_id"],
            source_checkpoint_uuid=raw["source_checkpoint_uuid"],
            max_length=length,
            max_length_unit=unit,
            max_trials=1 if single else raw.get("max_trials"),
            max_concurrent_trials=1 if single else raw["max_concurrent_trials"],
            time_metric=raw.get("time_metric"),
            max_time=raw.get("max_time"),
            mode=raw.get("mode", "standard"),
            divisor=float(raw.get("divisor", 4.0)),
            max_rungs=raw.get("max_rungs", 5),
            bracket_rungs=list(raw.get("bracket_rungs", [])),
            stop_once=raw.get("stop_once", False),
            num_rungs=raw.get("num_rungs"),
        )
