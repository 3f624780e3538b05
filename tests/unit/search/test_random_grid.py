"""single, random and grid searchers (spec §4 single/random, grid)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from hpcdet.config.searcher import SearcherConfig
from hpcdet.search import (
    EXIT_CANCELED,
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
    ValidationReported,
)
from hpcdet.search.rng import MT19937

SPACE = {
    "units": {"type": "int", "minval": 1, "maxval": 8, "count": 3},
    "lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10, "count": 2},
    "act": {"type": "categorical", "vals": ["relu", "tanh"]},
}


def random_cfg(**kw: Any) -> SearcherConfig:
    return SearcherConfig(**{"name": "random", "metric": "loss", "max_trials": 5,
                             "max_concurrent_trials": 2, **kw})


def creates(actions: list[Action]) -> list[int]:
    return [a.request_id for a in actions if isinstance(a, Create)]


def exit_(rid: int, reason: str = EXIT_COMPLETED) -> TrialExited:
    return TrialExited(rid, reason)


def test_random_starts_up_to_the_concurrency_and_replaces_each_exit() -> None:
    s = Searcher(random_cfg(), SPACE, 1)
    assert creates(s.feed(Initialize())) == [0, 1]
    assert s.feed(ValidationReported(0, {"loss": 1.0})) == []  # random ignores metrics
    assert creates(s.feed(exit_(0))) == [2]
    assert creates(s.feed(exit_(1, EXIT_ERRORED))) == [3]
    assert creates(s.feed(exit_(3))) == [4]
    assert s.feed(exit_(2)) == []  # 5 created: no more
    assert s.progress() == pytest.approx(4 / 5)
    assert s.feed(exit_(4)) == [Shutdown()]
    assert s.created() == [0, 1, 2, 3, 4] and s.finished()
    assert s.feed(exit_(4)) == []


def test_random_invalid_hp_trials_do_not_count() -> None:
    s = Searcher(random_cfg(max_trials=2, max_concurrent_trials=2), SPACE, 1)
    assert creates(s.feed(Initialize())) == [0, 1]
    assert creates(s.feed(exit_(0, EXIT_INVALID_HP))) == [2]
    assert creates(s.feed(exit_(2, EXIT_INVALID_HP))) == [3]
    assert s.feed(exit_(1)) == []
    assert s.feed(exit_(3)) == [Shutdown()]


def test_random_concurrency_zero_is_unlimited() -> None:
    s = Searcher(random_cfg(max_trials=7, max_concurrent_trials=0), SPACE, 1)
    assert creates(s.feed(Initialize())) == list(range(7))
    assert (s.trial_count_bound(), s.concurrency()) == (7, 7)
    s = Searcher(random_cfg(max_trials=7, max_concurrent_trials=16), SPACE, 1)
    assert creates(s.feed(Initialize())) == list(range(7))
    assert (s.trial_count_bound(), s.concurrency()) == (7, 7)
    s = Searcher(random_cfg(max_trials=200, max_concurrent_trials=4), SPACE, 1)
    assert creates(s.feed(Initialize())) == [0, 1, 2, 3]
    assert (s.trial_count_bound(), s.concurrency()) == (200, 4)


def test_random_draws_hparams_then_seed_like_numpy() -> None:
    np = pytest.importorskip("numpy")
    s = Searcher(random_cfg(max_trials=3, max_concurrent_trials=0), SPACE, 777)
    reference = np.random.RandomState(777)
    expected = []
    for rid in range(3):
        point = {  # sorted: act, lr, units
            "act": ["relu", "tanh"][reference.randint(0, 2)],
            "lr": math.pow(10.0, reference.uniform(-4, -1)),
            "units": 1 + int(reference.randint(0, 8)),
        }
        expected.append(Create(rid, point, int(reference.randint(0, 2**31))))
    assert s.feed(Initialize()) == expected


def test_legacy_ops_draw_a_request_uuid_before_the_seed() -> None:
    """0.37 (max_length set): Determined read 16 bytes for the request UUID before the seed."""
    s = Searcher(random_cfg(max_trials=2, max_concurrent_trials=0, max_length=10), {}, 9)
    ref = MT19937(9)
    seeds = []
    for _ in range(2):
        ref.read_bytes(16)
        seeds.append(ref.trial_seed())
    assert s.feed(Initialize()) == [
        Create(0, {}, seeds[0]), ValidateAfter(0, 10), Close(0),
        Create(1, {}, seeds[1]), ValidateAfter(1, 10), Close(1),
    ]
    assert s.feed(OpCompleted(0, 10, 0.5)) == []


def test_single_is_one_trial_and_does_not_replace_invalid_hp() -> None:
    s = Searcher(SearcherConfig(name="single", metric="x", max_length=1), {}, 0)
    actions = s.feed(Initialize())
    assert [type(a) for a in actions] == [Create, ValidateAfter, Close]
    assert (s.trial_count_bound(), s.concurrency()) == (1, 1)
    assert s.feed(exit_(0, EXIT_INVALID_HP)) == [Shutdown()]
    s = Searcher(SearcherConfig(name="single", metric="x"), {}, 0)
    assert creates(s.feed(Initialize())) == [0]
    assert s.feed(exit_(0)) == [Shutdown()]
    assert s.progress() == 1.0


def test_all_trials_errored_is_a_failure_and_all_canceled_a_cancel() -> None:
    s = Searcher(random_cfg(max_trials=2), SPACE, 3)
    s.feed(Initialize())
    assert s.feed(exit_(0, EXIT_ERRORED)) == []
    (shutdown,) = s.feed(exit_(1, EXIT_ERRORED))
    assert isinstance(shutdown, Shutdown) and shutdown.failure and "every trial" in shutdown.message
    s = Searcher(random_cfg(max_trials=2), SPACE, 3)
    s.feed(Initialize())
    s.feed(exit_(0, EXIT_CANCELED))
    assert s.feed(exit_(1, EXIT_CANCELED)) == [Shutdown(cancel=True)]
    s = Searcher(random_cfg(max_trials=2), SPACE, 3)
    s.feed(Initialize())
    s.feed(exit_(0, EXIT_ERRORED))
    assert s.feed(exit_(1)) == [Shutdown()]


# ---- grid ---------------------------------------------------------------------------------------

GRID_POINTS = [  # product order: act slowest, then lr, then units (1 + i * 7 / 2 -> 1, 5, 8)
    {"act": act, "lr": lr, "units": units}
    for act in ("relu", "tanh") for lr in (math.pow(10, -4), math.pow(10, -1))
    for units in (1, 5, 8)
]


def grid_cfg(**kw: Any) -> SearcherConfig:
    return SearcherConfig(**{"name": "grid", "metric": "loss", "max_concurrent_trials": 3, **kw})


def test_grid_creates_points_in_reverse_product_order() -> None:
    s = Searcher(grid_cfg(), SPACE, 5)
    assert (s.trial_count_bound(), s.concurrency()) == (12, 3)
    first = s.feed(Initialize())
    assert [a.hparams for a in first if isinstance(a, Create)] == GRID_POINTS[::-1][:3]
    made = [a for rid in range(12) for a in s.feed(exit_(rid, EXIT_INVALID_HP))]
    points = [a.hparams for a in first + made if isinstance(a, Create)]
    assert points == GRID_POINTS[::-1]  # invalid-hp trials are not replaced: 12 trials in all
    assert made[-1] == Shutdown()
    assert s.progress() == 1.0


def test_grid_unlimited_concurrency_and_legacy_ops() -> None:
    s = Searcher(grid_cfg(max_concurrent_trials=0, max_length=4), SPACE, 5)
    actions = s.feed(Initialize())
    assert len(actions) == 36 and actions[1:3] == [ValidateAfter(0, 4), Close(0)]
    assert s.concurrency() == 12


def test_grid_without_hyperparameters_is_one_trial() -> None:
    s = Searcher(grid_cfg(), {}, 5)
    assert creates(s.feed(Initialize())) == [0]
    assert s.feed(exit_(0)) == [Shutdown()]
