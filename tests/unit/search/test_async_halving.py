"""async_halving: one ASHA bracket of exactly ``num_rungs`` rungs, with all of ``max_trials``
(Determined 0.38 still accepts it). Rungs are hand-computed: rung k of n needs
``max(int(L / d ** (n - k - 1)), 1)`` units."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from hpcdet.config import load_experiment_config
from hpcdet.config.searcher import SearcherConfig
from hpcdet.errors import ConfigError
from hpcdet.search import (
    EXIT_COMPLETED,
    Action,
    Close,
    Create,
    Initialize,
    OpCompleted,
    Searcher,
    Shutdown,
    Stop,
    TrialExited,
    ValidateAfter,
    ValidationReported,
)
from hpcdet.search.asha import rung_lengths

HP = {"x": {"type": "int", "minval": 1, "maxval": 9, "count": None}}


def halving(**kw: Any) -> Searcher:
    return Searcher(SearcherConfig(**{"name": "async_halving", "metric": "loss", **kw}), HP, 11)


def shape(actions: list[Action]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for a in actions:
        if isinstance(a, Create):
            out.append(("create", a.request_id))
        elif isinstance(a, ValidateAfter):
            out.append(("train", a.request_id, a.length))
        elif isinstance(a, (Close, Stop)):
            out.append((type(a).__name__.lower(), a.request_id))
        else:
            raise AssertionError(f"unexpected {a}")
    return out


@pytest.mark.parametrize(("rungs", "length", "divisor", "expected"), [
    (3, 100, 4.0, [6, 25, 100]),    # 100/16 = 6.25, 100/4
    (4, 1000, 3.0, [37, 111, 333, 1000]),
    (5, 10, 4.0, [1, 1, 1, 2, 10]),  # short lengths floor at 1 unit (and repeat)
    (1, 7, 4.0, [7]),
])
def test_rungs_are_num_rungs_lengths_of_one_bracket(rungs: int, length: int, divisor: float,
                                                    expected: list[int]) -> None:
    config = SearcherConfig(name="async_halving", metric="loss", max_length=length,
                            max_trials=10, divisor=divisor, num_rungs=rungs)
    assert rung_lengths(config) == sorted(set(expected))
    s = halving(max_length=length, max_trials=10, divisor=divisor, num_rungs=rungs,
                max_concurrent_trials=1)
    assert shape(s.feed(Initialize())) == [("create", 0), ("train", 0, expected[0])]


def test_promotes_as_the_one_bracket_of_adaptive_asha_does() -> None:
    """3 rungs (1, 3, 9), divisor 3, 6 trials, 2 at a time: the same decisions as adaptive_asha
    with bracket_rungs [3], which is this bracket."""
    kw: dict[str, Any] = {"max_length": 9, "divisor": 3.0, "max_trials": 6,
                          "max_concurrent_trials": 2}
    mine = halving(num_rungs=3, **kw)
    theirs = Searcher(SearcherConfig(name="adaptive_asha", metric="loss", bracket_rungs=[3],
                                     **kw), HP, 11)
    assert shape(mine.feed(Initialize())) == [("create", 0), ("train", 0, 1),
                                              ("create", 1), ("train", 1, 1)]
    theirs.feed(Initialize())
    assert (mine.trial_count_bound(), mine.concurrency()) == (6, 2)
    script = [(0, 1, 5.0), (1, 1, 3.0), (2, 1, 3.0), (3, 1, 1.0), (1, 3, 2.0), (3, 3, 2.0),
              (4, 1, 3.0), (5, 1, 0.5), (5, 3, 1.0), (5, 9, 0.7)]
    for rid, length, metric in script:
        event = OpCompleted(rid, length, metric)
        assert shape(mine.feed(event)) == shape(theirs.feed(event)), (rid, length)
    for rid in (4, 2, 0, 1, 3):
        assert mine.feed(TrialExited(rid, EXIT_COMPLETED)) == []
    assert mine.feed(TrialExited(5, EXIT_COMPLETED)) == [Shutdown()]
    assert mine.progress() == 1.0


def test_unlimited_concurrency_starts_enough_for_one_trial_at_the_top() -> None:
    # max_concurrent_trials 0: min(int(4 ** (3 - 1)), max_trials) = 16 trials at once.
    s = halving(max_length=64, max_trials=40, num_rungs=3, max_concurrent_trials=0)
    assert [a for a in shape(s.feed(Initialize())) if a[0] == "create"] == [
        ("create", i) for i in range(16)]
    s = halving(max_length=64, max_trials=5, num_rungs=3, max_concurrent_trials=0)
    assert len([a for a in s.feed(Initialize()) if isinstance(a, Create)]) == 5


def test_the_0_38_shape_stops_on_validation_reports() -> None:
    # time_metric + max_time: rungs at 1, 3, 9 batches; the worse of two at rung 1 stops.
    s = halving(time_metric="batches", max_time=9, divisor=3.0, max_trials=4,
                max_concurrent_trials=2, num_rungs=3)
    assert shape(s.feed(Initialize())) == [("create", 0), ("create", 1)]
    assert shape(s.feed(ValidationReported(0, {"loss": 1.0, "batches": 3}))) == []
    assert shape(s.feed(ValidationReported(1, {"loss": 2.0, "batches": 3}))) == [
        ("stop", 1), ("create", 2)]


def _load(searcher: str) -> Any:
    return load_experiment_config(textwrap.dedent(f"""\
        entrypoint: python3 train.py
        hyperparameters: {{lr: {{type: double, minval: 0.001, maxval: 0.1}}}}
        searcher: {searcher}
        """))


def test_the_config_of_either_generation_is_accepted() -> None:
    legacy = _load("{name: async_halving, metric: loss, num_rungs: 3, max_trials: 16,"
                   " max_length: {batches: 900}, divisor: 3}").searcher
    assert (legacy.num_rungs, legacy.max_length, legacy.max_length_unit, legacy.divisor,
            legacy.max_concurrent_trials) == (3, 900, "batches", 3.0, 16)
    current = _load("{name: async_halving, metric: loss, num_rungs: 2, max_trials: 4,"
                    " time_metric: batches, max_time: 100, stop_once: true}").searcher
    assert (current.time_metric, current.max_time, current.stop_once) == ("batches", 100, True)


@pytest.mark.parametrize(("searcher", "start"), [
    ("{name: async_halving, metric: loss, max_trials: 4, max_length: 10}",
     "searcher.num_rungs: is required for the async_halving searcher"),
    ("{name: async_halving, metric: loss, num_rungs: 2, max_length: 10}",
     "searcher.max_trials: is required for the async_halving searcher"),
    ("{name: async_halving, metric: loss, num_rungs: 0, max_trials: 4, max_length: 10}",
     "searcher.num_rungs: "),
    ("{name: async_halving, metric: loss, num_rungs: 2, max_trials: 4}",
     "searcher: the `async_halving` searcher requires `max_time` and `time_metric`"),
    ("{name: async_halving, metric: loss, num_rungs: 2, max_trials: 4, max_length: 10,"
     " mode: standard}", "searcher.mode: "),
])
def test_missing_or_foreign_keys_are_named(searcher: str, start: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(searcher)
    path, _, message = start.partition(": ")
    assert any(p.startswith(path + " ") and message in p for p in info.value.problems), (
        info.value.problems)
