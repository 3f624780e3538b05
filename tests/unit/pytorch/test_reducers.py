"""Reducing metrics over batches and workers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import require_modules

require_modules("torch")

import torch  # noqa: E402

from hpcdet.pytorch import MetricReducer, Reducer  # noqa: E402
from hpcdet.pytorch._reducer import (  # noqa: E402
    WrappedReducer,
    check_batches,
    check_reducers,
    plain_metrics,  # noqa: E402
    reduce_batches,
    scalar,
)


def test_each_reducer_over_every_batch_of_every_worker() -> None:
    batches = [{"x": 1.0, "n": 2}, {"x": 3.0, "n": 5}, {"x": 8.0, "n": 1}]
    assert reduce_batches(batches, Reducer.AVG) == {"x": 4.0, "n": pytest.approx(8 / 3)}
    assert reduce_batches(batches, {"x": Reducer.SUM, "n": Reducer.MAX}) == {"x": 12.0, "n": 5}
    assert reduce_batches(batches, Reducer.MIN) == {"x": 1.0, "n": 1}


def test_values_that_are_not_numbers_keep_the_last() -> None:
    assert reduce_batches([{"tag": "a"}, {"tag": "b"}], Reducer.AVG) == {"tag": "b"}


def test_tensors_become_plain_numbers_and_a_tensor_is_the_loss() -> None:
    assert scalar(torch.tensor(2.5)) == 2.5 and scalar(torch.tensor([1, 2])) == [1, 2]
    assert plain_metrics(torch.tensor(0.5), "train_batch()") == {"loss": 0.5}
    with pytest.raises(TypeError, match="train_batch\\(\\) must return a dict of metrics"):
        plain_metrics([1.0], "train_batch()")


def test_validation_metric_names_and_reducers_must_agree() -> None:
    with pytest.raises(ValueError, match="must match across all batches"):
        check_batches([{"a": 1}, {"b": 1}], Reducer.AVG)
    with pytest.raises(ValueError, match="a Reducer for every validation metric"):
        check_batches([{"a": 1, "b": 2}], {"a": Reducer.AVG})
    with pytest.raises(ValueError, match="validation data loader is empty"):
        check_batches([], Reducer.AVG)
    with pytest.raises(TypeError, match="evaluation_reducer\\(\\) must return"):
        check_reducers("avg")


class _Counts(MetricReducer):
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.hits, self.total = 0, 0

    def update(self, hits: int, total: int) -> None:
        self.hits += hits
        self.total += total

    def per_slot_reduce(self) -> Any:
        return self.hits, self.total

    def cross_slot_reduce(self, per_slot_metrics: Any) -> Any:
        hits = sum(h for h, _ in per_slot_metrics)
        return hits / sum(t for _, t in per_slot_metrics)


def test_a_metric_reducer_reduces_per_worker_then_across() -> None:
    r = _Counts()
    r.update(3, 4)
    wrapped = WrappedReducer(r, "accuracy", True, True)
    assert wrapped.result([r.per_slot_reduce(), (1, 4)]) == {"accuracy": 0.5}
    unnamed = WrappedReducer(r, None, True, True)
    with pytest.raises(TypeError, match="must return a dict of metrics"):
        unnamed.result([r.per_slot_reduce()])


def test_batches_move_to_the_device_numpy_arrays_becoming_tensors() -> None:
    import numpy as np

    from hpcdet.pytorch import to_device

    moved = to_device({"x": [np.arange(3), (torch.ones(2),)], "name": "a"}, "cpu")
    assert isinstance(moved["x"][0], torch.Tensor) and moved["x"][0].tolist() == [0, 1, 2]
    assert isinstance(moved["x"][1], tuple) and moved["name"] == "a"
