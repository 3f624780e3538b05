"""The DataLoader's plan: per-slot batches, sharding with an uneven last step, resumption."""

from __future__ import annotations

import pytest

from tests.support import require_modules

require_modules("torch")

import torch  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

from hpcdet.pytorch import DataLoader  # noqa: E402
from hpcdet.pytorch._data import epoch_batches, shard, steps_per_epoch  # noqa: E402


def test_an_epoch_is_cut_into_per_slot_batches_with_a_short_last_one() -> None:
    batches = epoch_batches(10, 4, shuffle=False, drop_last=False, seed=0, epoch=0)
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert epoch_batches(10, 4, shuffle=False, drop_last=True, seed=0, epoch=0) == batches[:2]


def test_shuffled_epochs_depend_on_seed_and_epoch_only() -> None:
    a = epoch_batches(100, 8, shuffle=True, drop_last=False, seed=3, epoch=1)
    assert a == epoch_batches(100, 8, shuffle=True, drop_last=False, seed=3, epoch=1)
    assert a != epoch_batches(100, 8, shuffle=True, drop_last=False, seed=3, epoch=2)
    assert a != epoch_batches(100, 8, shuffle=True, drop_last=False, seed=4, epoch=1)
    assert sorted(i for b in a for i in b) == list(range(100))


def test_sharding_gives_each_worker_every_nth_batch_and_pads_training_epochs() -> None:
    batches = [[0], [1], [2], [3], [4]]  # 5 batches over 2 workers: an uneven last step
    assert shard(batches, 2, 0, pad=False) == [[0], [2], [4]]
    assert shard(batches, 2, 1, pad=False) == [[1], [3]]
    # Training: every worker takes part in each of the 3 steps; the last is filled with the
    # epoch's first batch.
    assert shard(batches, 2, 1, pad=True) == [[1], [3], [0]]
    assert steps_per_epoch(5, 2) == 3 and steps_per_epoch(4, 2) == 2


def _loader(n: int = 10, batch: int = 2, shuffle: bool = True) -> DataLoader:
    data = TensorDataset(torch.arange(n))
    return DataLoader(data, batch_size=batch, shuffle=shuffle)


def _take(loader: torch.utils.data.DataLoader, count: int) -> list[list[int]]:  # type: ignore[type-arg]
    it = iter(loader)
    return [next(it)[0].tolist() for _ in range(count)]


def test_workers_together_see_each_record_once_per_epoch() -> None:
    dl = _loader(n=12, batch=2)
    per_worker = [_take(dl.get_data_loader(repeat=True, num_replicas=3, rank=r, seed=1), 2)
                  for r in range(3)]
    seen = sorted(i for worker in per_worker for b in worker for i in b)
    assert seen == list(range(12))
    assert dl.steps_per_epoch(3, seed=1) == 2


def test_a_loader_resumed_at_a_step_continues_the_same_sequence() -> None:
    dl = _loader(n=10, batch=3)  # 4 batches an epoch, the last one short
    whole = _take(dl.get_data_loader(repeat=True, num_replicas=2, rank=1, seed=5), 7)
    resumed = _take(dl.get_data_loader(repeat=True, skip=3, num_replicas=2, rank=1, seed=5), 4)
    assert resumed == whole[3:]
    assert [len(b) for b in whole[:2]] == [3, 1]  # the short batch of epoch 0 on worker 1


def test_validation_is_not_padded_and_not_repeated() -> None:
    dl = _loader(n=10, batch=4, shuffle=False)
    worker0 = [b[0].tolist() for b in dl.get_data_loader(num_replicas=2, rank=0)]
    worker1 = [b[0].tolist() for b in dl.get_data_loader(num_replicas=2, rank=1)]
    assert worker0 == [[0, 1, 2, 3], [8, 9]] and worker1 == [[4, 5, 6, 7]]


def test_iterating_the_loader_gives_one_epoch() -> None:
    assert [b[0].tolist() for b in _loader(n=5, batch=2, shuffle=False)] == [[0, 1], [2, 3], [4]]


def test_building_a_loader_draws_nothing_from_torchs_generator() -> None:
    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    _take(_loader().get_data_loader(repeat=True, skip=2, seed=9), 1)
    assert torch.equal(torch.rand(1), expected)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_sampler": [[0]], "batch_size": 2}, "batch_sampler option is mutually exclusive"),
        ({"sampler": [0], "shuffle": True}, "sampler option is mutually exclusive with shuffle"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
    ],
)
def test_conflicting_arguments_are_refused_as_torch_names_them(kwargs: dict, message: str
                                                               ) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=message):
        DataLoader(TensorDataset(torch.arange(4)), **kwargs)
