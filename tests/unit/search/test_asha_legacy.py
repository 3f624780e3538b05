"""0.37 adaptive ASHA driven by operations: hand-checked promotion and stop_once scenarios."""

from __future__ import annotations

from typing import Any

import pytest

from hpcdet.config.searcher import SearcherConfig
from hpcdet.search import (
    EXIT_COMPLETED,
    EXIT_ERRORED,
    EXIT_INVALID_HP,
    Action,
    Close,
    Create,
    Initialize,
    OpCompleted,
    Searcher,
    Shutdown,
    TrialExited,
    ValidateAfter,
)


def asha(**kw: Any) -> Searcher:
    config = SearcherConfig(**{"name": "adaptive_asha", "metric": "loss", **kw})
    return Searcher(config, {"x": {"type": "int", "minval": 1, "maxval": 9, "count": None}}, 11)


def shape(actions: list[Action]) -> list[tuple[str, int] | tuple[str, int, int]]:
    """Decisions without hyperparameters and seeds: (kind, request id[, length])."""
    out: list[tuple[str, int] | tuple[str, int, int]] = []
    for a in actions:
        if isinstance(a, Create):
            out.append(("create", a.request_id))
        elif isinstance(a, ValidateAfter):
            out.append(("train", a.request_id, a.length))
        elif isinstance(a, Close):
            out.append(("close", a.request_id))
        else:
            raise AssertionError(f"unexpected {a}")
    return out


def done(s: Searcher, rid: int, length: int, metric: float) -> list[Any]:
    return shape(s.feed(OpCompleted(rid, length, metric)))


def test_promotions_old_num_promote_ties_after_and_close_out() -> None:
    # One bracket of 3 rungs (units 1, 3, 9), divisor 3, 6 trials, 2 at a time.
    s = asha(max_length=9, divisor=3.0, max_trials=6, max_concurrent_trials=2,
             bracket_rungs=[3])
    assert shape(s.feed(Initialize())) == [("create", 0), ("train", 0, 1),
                                           ("create", 1), ("train", 1, 1)]
    assert (s.trial_count_bound(), s.concurrency()) == (6, 2)
    # Rung 0 has 0 entries: int(1/3) = 0 promotions; nothing trains, so a new trial starts.
    assert done(s, 0, 1, 5.0) == [("create", 2), ("train", 2, 1)]
    assert done(s, 1, 1, 3.0) == [("create", 3), ("train", 3, 1)]
    # Third entry: int(3/3) = 1 promotion is due. Trial 2 ties trial 1's 3.0 and goes AFTER it
    # (index 1, not < 1), so the trial at index oldNumPromote = 0 -- trial 1 -- is promoted.
    assert done(s, 2, 1, 3.0) == [("train", 1, 3)]
    # Trial 3 is best: index 0 < int(4/3) = 1, promoted at once.
    assert done(s, 3, 1, 1.0) == [("train", 3, 3)]
    assert done(s, 1, 3, 2.0) == [("create", 4), ("train", 4, 1)]
    assert done(s, 3, 3, 2.0) == [("create", 5), ("train", 5, 1)]  # tie: after trial 1
    assert done(s, 4, 1, 3.0) == []  # budget used up; int(5/3) = 1 = old: nothing to promote
    # Sixth and last rung-0 entry: promoted (0 < int(6/3) = 2); rung 0 has no trial training,
    # so its unpromoted trials are closed out; rung 1 still has trial 5 coming.
    assert done(s, 5, 1, 0.5) == [("train", 5, 3), ("close", 2), ("close", 4), ("close", 0)]
    assert s.progress() == pytest.approx(6 / 7.2)
    # Rung 1 gets its third entry: trial 5 is best and goes to the top; rung 1 closes out.
    assert done(s, 5, 3, 1.0) == [("train", 5, 9), ("close", 1), ("close", 3)]
    assert done(s, 5, 9, 0.7) == [("close", 5)]  # top rung: closed
    for rid in (4, 2, 0, 1, 3):
        assert s.feed(TrialExited(rid, EXIT_COMPLETED)) == []
    assert s.feed(TrialExited(5, EXIT_COMPLETED)) == [Shutdown()]
    assert s.progress() == 1.0


def test_exited_trial_promoted_reports_the_worst_metric_at_once() -> None:
    # One bracket of 2 rungs (units 2, 4), divisor 2, 3 trials, 2 at a time.
    s = asha(max_length=4, divisor=2.0, max_trials=3, max_concurrent_trials=2,
             bracket_rungs=[2])
    s.feed(Initialize())
    # Trial 0 errors while training: it ranks last (MaxFloat64) in rung 0; a new trial starts.
    assert shape(s.feed(TrialExited(0, EXIT_ERRORED))) == [("create", 2), ("train", 2, 2)]
    # Trial 1 errors too: its MaxFloat64 ties and goes after trial 0; one promotion is now due
    # (int(2/2) = 1) and goes to trial 0 at index 0 -- which has exited, so it "reports"
    # MaxFloat64 on the top rung at once: no operation, no Close (it is gone).
    assert s.feed(TrialExited(1, EXIT_ERRORED)) == []
    assert done(s, 2, 2, 1.0) == [("train", 2, 4)]  # 0 < int(3/2) = 1
    assert done(s, 2, 4, 0.5) == [("close", 2)]
    assert s.feed(TrialExited(2, EXIT_COMPLETED)) == [Shutdown()]  # 2 of 3 errored: no failure


def test_larger_is_better_negates_the_metric() -> None:
    s = asha(max_length=4, divisor=2.0, max_trials=2, max_concurrent_trials=2,
             bracket_rungs=[2], smaller_is_better=False)
    s.feed(Initialize())
    assert done(s, 0, 2, 1.0) == []
    # Larger is better: 5.0 ranks first, so trial 1 is promoted itself.
    assert done(s, 1, 2, 5.0) == [("train", 1, 4), ("close", 0)]


def test_invalid_hp_is_replaced_and_removed_from_its_rungs() -> None:
    s = asha(max_length=4, divisor=2.0, max_trials=2, max_concurrent_trials=2,
             bracket_rungs=[2])
    s.feed(Initialize())
    assert done(s, 0, 2, 1.0) == []
    assert shape(s.feed(TrialExited(1, EXIT_INVALID_HP))) == [("create", 2), ("train", 2, 2)]
    # Rung 0 holds only trial 0, so trial 2 is its second entry: 0 < int(2/2) = 1 -> promoted.
    assert done(s, 2, 2, 0.5) == [("train", 2, 4), ("close", 0)]


def test_unexpected_operations_are_ignored() -> None:
    s = asha(max_length=4, divisor=2.0, max_trials=2, max_concurrent_trials=2,
             bracket_rungs=[2])
    s.feed(Initialize())
    assert s.feed(OpCompleted(0, 3, 1.0)) == []  # wrong length
    assert s.feed(OpCompleted(7, 2, 1.0)) == []  # no such trial
    assert done(s, 0, 2, 1.0) == []
    assert s.feed(OpCompleted(0, 2, 1.0)) == []  # completed twice


@pytest.mark.parametrize("metric", ["NaN", float("nan"), float("inf"), None, True, "1.0"])
def test_non_numeric_metric_fails_the_search(metric: Any) -> None:
    s = asha(max_length=4, max_trials=2, bracket_rungs=[2], divisor=2.0)
    s.feed(Initialize())
    (shutdown,) = s.feed(OpCompleted(0, 2, metric))
    assert isinstance(shutdown, Shutdown) and shutdown.failure
    assert shutdown.message.startswith("error parsing searcher metric (loss)")
    assert repr(metric) in shutdown.message
    assert s.feed(OpCompleted(1, 2, 1.0)) == [] and s.finished()


def test_stop_once_promotes_or_closes_the_reporter_ties_before() -> None:
    s = asha(max_length=4, divisor=2.0, max_trials=3, max_concurrent_trials=1,
             bracket_rungs=[2], stop_once=True)
    assert shape(s.feed(Initialize())) == [("create", 0), ("train", 0, 2)]
    assert done(s, 0, 2, 1.0) == [("train", 0, 4)]  # max(int(1/2), 1) = 1: index 0 continues
    assert done(s, 0, 4, 1.0) == [("close", 0), ("create", 1), ("train", 1, 2)]
    # Tie with trial 0's 1.0 goes BEFORE it: index 0 < max(int(2/2), 1) = 1 -> continues.
    assert done(s, 1, 2, 1.0) == [("train", 1, 4)]
    assert done(s, 1, 4, 2.0) == [("close", 1), ("create", 2), ("train", 2, 2)]
    assert done(s, 2, 2, 5.0) == [("close", 2)]  # index 2 >= 1: closed; budget used up
    for rid in range(2):
        assert s.feed(TrialExited(rid, EXIT_COMPLETED)) == []
    assert s.feed(TrialExited(2, EXIT_COMPLETED)) == [Shutdown()]


def test_stop_once_early_exit_ranks_last_without_decisions() -> None:
    s = asha(max_length=4, divisor=2.0, max_trials=2, max_concurrent_trials=1,
             bracket_rungs=[2], stop_once=True)
    s.feed(Initialize())
    assert shape(s.feed(TrialExited(0, EXIT_ERRORED))) == [("create", 1), ("train", 1, 2)]
    assert done(s, 1, 2, 1.0) == [("train", 1, 4)]  # index 0 of 2: continues
