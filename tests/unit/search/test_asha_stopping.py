"""0.38 adaptive ASHA, stopping-based, driven by validation reports."""

from __future__ import annotations

from typing import Any

import pytest

from hpcdet.config.searcher import SearcherConfig
from hpcdet.search import (
    EXIT_COMPLETED,
    EXIT_ERRORED,
    EXIT_INVALID_HP,
    EXIT_USER_STOP,
    Action,
    Create,
    Initialize,
    Searcher,
    Shutdown,
    Stop,
    TrialExited,
    ValidationReported,
)


def asha(**kw: Any) -> Searcher:
    config = SearcherConfig(**{"name": "adaptive_asha", "metric": "loss",
                               "time_metric": "batches", **kw})
    return Searcher(config, {"x": {"type": "double", "minval": 0, "maxval": 1, "count": None}}, 3)


def shape(actions: list[Action]) -> list[tuple[str, int]]:
    kinds = {Create: "create", Stop: "stop"}
    return [(kinds[type(a)], a.request_id) for a in actions]  # type: ignore[union-attr]


def report(s: Searcher, rid: int, **metrics: Any) -> list[tuple[str, int]]:
    return shape(s.feed(ValidationReported(rid, metrics)))


def one_bracket(**kw: Any) -> Searcher:
    # One bracket of 3 rungs (units 1, 3, 9), divisor 3, 4 trials, 2 at a time.
    settings: dict[str, Any] = {"max_time": 9, "divisor": 3.0, "max_trials": 4,
                                "max_concurrent_trials": 2, "bracket_rungs": [3], **kw}
    return asha(**settings)


def test_stopping_scenario() -> None:
    s = one_bracket()
    assert shape(s.feed(Initialize())) == [("create", 0), ("create", 1)]
    # One report can pass several rungs: batches 3 qualifies for rungs 0 (1) and 1 (3); trial 0
    # is alone (best) in both, then 3 < 9 stops the check. No stop, so no new trial.
    assert report(s, 0, loss=1.0, batches=3) == []
    # A tie goes BEFORE the equal metric: index 0 < max(int(2/3), 1) = 1 -> continues.
    assert report(s, 1, loss=1.0, batches=1) == []
    assert report(s, 1, loss=1.0, batches=2) == []  # 2 < 3: still below rung 1
    # Rung 1: 2.0 goes after 1.0 (index 1 >= 1): stopped, and a new trial replaces it.
    assert report(s, 1, loss=2.0, batches=3) == [("stop", 1), ("create", 2)]
    assert report(s, 1, loss=0.1, batches=4) == []  # a stopped trial's reports are ignored
    # Top rung: every trial reaching it is stopped (it is done).
    assert report(s, 0, loss=0.5, batches=9) == [("stop", 0), ("create", 3)]
    assert s.feed(TrialExited(1, EXIT_COMPLETED)) == []
    assert s.feed(TrialExited(0, EXIT_COMPLETED)) == []
    # Rung 0 now holds [1.0 (trial 1), 1.0 (trial 0)]: 3.0 is index 2 >= int(3/3): stopped;
    # all 4 trials created, so no new one.
    assert report(s, 2, loss=3.0, batches=1) == [("stop", 2)]
    assert s.feed(TrialExited(3, EXIT_ERRORED)) == []  # early exit ranks last; budget used up
    assert s.progress() == pytest.approx(max(4 / 4.8, 3 / 4))
    assert s.feed(TrialExited(2, EXIT_COMPLETED)) == [Shutdown()]
    assert s.progress() == 1.0


def test_only_stops_and_early_exits_create_trials() -> None:
    s = one_bracket(max_concurrent_trials=1)
    assert shape(s.feed(Initialize())) == [("create", 0)]
    assert report(s, 0, loss=1.0, batches=5) == []
    assert s.feed(TrialExited(0, EXIT_COMPLETED)) == [Shutdown()]  # not stopped: not replaced
    s = one_bracket(max_concurrent_trials=1)
    s.feed(Initialize())
    assert shape(s.feed(TrialExited(0, EXIT_USER_STOP))) == [("create", 1)]
    assert shape(s.feed(TrialExited(1, EXIT_INVALID_HP))) == [("create", 2)]
    assert report(s, 2, loss=1.0, batches=1) == []  # rung 0: [1.0, MaxFloat64 of trial 0]


def test_larger_is_better() -> None:
    s = one_bracket(smaller_is_better=False)
    s.feed(Initialize())
    assert report(s, 0, loss=1.0, batches=1) == []
    assert report(s, 1, loss=2.0, batches=1) == []  # -2.0 < -1.0: best, continues
    s = one_bracket(smaller_is_better=True)
    s.feed(Initialize())
    assert report(s, 0, loss=1.0, batches=1) == []
    assert report(s, 1, loss=2.0, batches=1) == [("stop", 1), ("create", 2)]


@pytest.mark.parametrize(("metrics", "start"), [
    ({"batches": 3}, "error parsing searcher metric (loss) from validation metrics: "),
    ({"loss": "NaN", "batches": 3}, "error parsing searcher metric (loss) from validation"),
    ({"loss": float("nan"), "batches": 3}, "error parsing searcher metric (loss)"),
    ({"loss": float("-inf"), "batches": 3}, "error parsing searcher metric (loss)"),
    ({"loss": [1.0], "batches": 3}, "error parsing searcher metric (loss)"),
    ({"loss": 1.0}, "error parsing searcher time metric (batches) in validation metrics: "),
    ({"loss": 1.0, "batches": "3"}, "error parsing searcher time metric (batches)"),
    ({"loss": 1.0, "batches": -1}, "error parsing searcher time metric (batches)"),
])
def test_bad_reports_fail_the_search(metrics: dict[str, Any], start: str) -> None:
    s = one_bracket()
    s.feed(Initialize())
    (shutdown,) = s.feed(ValidationReported(0, metrics))
    assert isinstance(shutdown, Shutdown) and shutdown.failure
    assert shutdown.message.startswith(start)
    name = "loss" if "searcher metric" in start else "batches"
    assert f"'{name}' must be" in shutdown.message
    assert s.feed(ValidationReported(1, {"loss": 1.0, "batches": 3})) == []
    assert s.feed(TrialExited(0, EXIT_ERRORED)) == []


def test_nan_string_message_names_the_metric_and_value() -> None:
    s = one_bracket()
    s.feed(Initialize())
    (shutdown,) = s.feed(ValidationReported(0, {"loss": "NaN", "batches": 3}))
    assert isinstance(shutdown, Shutdown)
    assert shutdown.message == (
        'error parsing searcher metric (loss) from validation metrics: {"batches": 3, "loss":'
        ' "NaN"}; the searcher metric \'loss\' must be a finite number, got \'NaN\''
    )


def test_fractional_time_metric() -> None:
    s = one_bracket()
    s.feed(Initialize())
    assert report(s, 0, loss=1.0, batches=2.9) == []  # uint64(2.9) = 2 < 3: only rung 0
    assert report(s, 1, loss=2.0, batches=3.0) == [("stop", 1), ("create", 2)]  # rung 0: 2nd
