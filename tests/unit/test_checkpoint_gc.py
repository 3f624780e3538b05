"""Checkpoint GC policy: which checkpoints of ended trials are deleted (hand-checked cases)."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from hpcdet.checkpoint_gc import (
    CheckpointRecord,
    RetentionPolicy,
    ValidationRecord,
    best,
    checkpoints_to_delete,
    rank,
)
from hpcdet.config.sections import CheckpointStorageConfig


def ckpt(uuid: str, trial: int, steps: int, reported: float | None = None) -> CheckpointRecord:
    return CheckpointRecord(uuid, trial, steps, float(steps) if reported is None else reported)


def val(trial: int, steps: int, **metrics: Any) -> ValidationRecord:
    return ValidationRecord(trial, steps, metrics)


# Trial 1: loss 0.5 @10, 0.2 @20, 0.4 @30.  Trial 2: loss 0.3 @10, 0.1 @20 (no ckpt), 0.6 @30.
CKPTS = [
    ckpt("a10", 1, 10), ckpt("a20", 1, 20), ckpt("a30", 1, 30),
    ckpt("b10", 2, 10), ckpt("b30", 2, 30),
]
VALS = [
    val(1, 10, loss=0.5), val(1, 20, loss=0.2), val(1, 30, loss=0.4),
    val(2, 10, loss=0.3), val(2, 20, loss=0.1), val(2, 30, loss=0.6),
]
ALL = {c.uuid for c in CKPTS}


def delete(policy: Any = None, *, smaller: bool = True, ckpts: Any = None, vals: Any = None,
           metric: str = "loss") -> set[str]:
    return checkpoints_to_delete(
        CKPTS if ckpts is None else ckpts, VALS if vals is None else vals,
        policy or RetentionPolicy(), metric, smaller,
    )


def test_defaults_keep_each_trial_s_best_and_latest() -> None:
    # Trial 1: best a20, latest a30. Trial 2: best b10, latest b30.
    assert delete() == {"a10"}


def test_experiment_best_adds_the_overall_best() -> None:
    policy = RetentionPolicy(save_experiment_best=2, save_trial_best=0, save_trial_latest=0)
    # Overall by loss: a20 (0.2), b10 (0.3), a30 (0.4), a10 (0.5), b30 (0.6).
    assert delete(policy) == {"a30", "a10", "b30"}


def test_larger_is_better() -> None:
    # Trial 1 best a10 (0.5), latest a30; trial 2 best and latest b30 (0.6).
    assert delete(smaller=False) == {"a20", "b10"}
    policy = RetentionPolicy(save_experiment_best=1, save_trial_best=0, save_trial_latest=0)
    assert delete(policy, smaller=False) == ALL - {"b30"}


def test_trial_latest_counts_steps() -> None:
    policy = RetentionPolicy(save_experiment_best=0, save_trial_best=0, save_trial_latest=2)
    assert delete(policy) == {"a10"}


def test_latest_of_equal_steps_is_the_later_report() -> None:
    ckpts = [ckpt("early", 1, 10, reported=5.0), ckpt("late", 1, 10, reported=6.0)]
    policy = RetentionPolicy(save_experiment_best=0, save_trial_best=0, save_trial_latest=1)
    assert delete(policy, ckpts=ckpts, vals=[]) == {"early"}


def test_all_zeros_deletes_everything() -> None:
    assert delete(RetentionPolicy(0, 0, 0)) == ALL


def test_checkpoint_without_validation_is_never_best() -> None:
    # Trial 3 has no validations at all: only its latest is kept.
    ckpts = [*CKPTS, ckpt("c10", 3, 10), ckpt("c20", 3, 20)]
    assert delete(ckpts=ckpts) == {"a10", "c10"}
    policy = RetentionPolicy(save_experiment_best=10, save_trial_best=10, save_trial_latest=0)
    assert delete(policy, ckpts=ckpts) == {"c10", "c20"}


def test_validation_at_another_step_does_not_count() -> None:
    # Trial 2's best loss (0.1 @20) has no checkpoint; its best checkpoint is b10.
    policy = RetentionPolicy(save_experiment_best=0, save_trial_best=1, save_trial_latest=0)
    assert delete(policy) == {"a10", "a30", "b30"}


@pytest.mark.parametrize("bad", [math.nan, "0.01", None, True, [0.01]])
def test_unusable_values_count_as_missing(bad: Any) -> None:
    ckpts = [ckpt("x", 1, 10), ckpt("y", 1, 20), ckpt("z", 1, 30)]
    vals = [val(1, 10, loss=bad), val(1, 20, loss=0.9), val(1, 30, acc=0.1)]
    policy = RetentionPolicy(save_experiment_best=0, save_trial_best=1, save_trial_latest=0)
    assert delete(policy, ckpts=ckpts, vals=vals) == {"x", "z"}


def test_ties_go_to_the_later_checkpoint() -> None:
    ckpts = [ckpt("p", 1, 10), ckpt("q", 1, 20), ckpt("r", 2, 20, reported=25.0)]
    vals = [val(1, 10, loss=0.3), val(1, 20, loss=0.3), val(2, 20, loss=0.3)]
    exp_best = RetentionPolicy(save_experiment_best=1, save_trial_best=0, save_trial_latest=0)
    # q and r both at step 20; r was reported later.
    assert delete(exp_best, ckpts=ckpts, vals=vals) == {"p", "q"}
    trial_best = RetentionPolicy(save_experiment_best=0, save_trial_best=1, save_trial_latest=0)
    assert delete(trial_best, ckpts=ckpts, vals=vals) == {"p"}


def test_no_checkpoints_deletes_nothing() -> None:
    assert delete(ckpts=[]) == set()
    # A trial with validations but no checkpoints changes nothing for the others.
    assert delete(vals=[*VALS, val(9, 10, loss=0.0)]) == {"a10"}


def test_repeated_reports_of_a_step_merge_later_winning() -> None:
    ranked = rank([ckpt("a", 1, 10)], [val(1, 10, loss=0.9, acc=1), val(1, 10, loss=0.1)], "loss")
    assert ranked[0].metric == 0.1


def test_a_checkpoint_outside_the_top_never_re_enters() -> None:
    # Deleting at each trial end equals deleting once at the end of the experiment.
    policy = RetentionPolicy(save_experiment_best=2, save_trial_best=1, save_trial_latest=1)
    deleted: set[str] = set()
    for ended in range(1, 3):
        ended_ckpts = [c for c in CKPTS if c.trial_id <= ended and c.uuid not in deleted]
        deleted |= delete(policy, ckpts=ended_ckpts)
    assert deleted == delete(policy)


def test_experiment_config_is_a_policy() -> None:
    storage = CheckpointStorageConfig(type="shared_fs", host_path="/x", save_trial_latest=0)
    assert delete(storage) == {"a10", "a30", "b30"}


def test_negative_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        delete(RetentionPolicy(save_trial_best=-1))


def test_best_lists_only_checkpoints_with_a_metric_best_first() -> None:
    ordered = best(rank(CKPTS, VALS, "loss"), smaller_is_better=True)
    assert [(r.checkpoint.uuid, r.metric) for r in ordered] == [
        ("a20", 0.2), ("b10", 0.3), ("a30", 0.4), ("a10", 0.5), ("b30", 0.6)
    ]


@pytest.mark.parametrize("seed", range(20))
def test_deleting_at_each_trial_end_equals_deleting_once(seed: int) -> None:
    rng = random.Random(seed)
    ckpts, vals = [], []
    for trial in range(1, 6):
        for steps in range(10, 10 * rng.randint(1, 6) + 1, 10):
            if rng.random() < 0.8:
                ckpts.append(ckpt(f"t{trial}s{steps}", trial, steps))
            if rng.random() < 0.7:
                vals.append(val(trial, steps, loss=rng.choice([0.1, 0.2, 0.3, rng.random()])))
    policy = RetentionPolicy(rng.randint(0, 3), rng.randint(0, 2), rng.randint(0, 2))
    smaller = rng.random() < 0.5
    deleted: set[str] = set()
    for ended in range(1, 6):
        alive = [c for c in ckpts if c.trial_id <= ended and c.uuid not in deleted]
        deleted |= delete(policy, smaller=smaller, ckpts=alive, vals=vals)
    assert deleted == delete(policy, smaller=smaller, ckpts=ckpts, vals=vals)
