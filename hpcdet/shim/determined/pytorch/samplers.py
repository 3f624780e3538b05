"""``determined.pytorch.samplers``: Determined's chainable samplers, for trials that build a
``torch.utils.data.DataLoader`` of their own (``disable_dataset_reproducibility_checks()``).

Each takes the sampler (of indices) or batch sampler (of lists of indices) below it in the
chain. Determined's own training chain, innermost first: shuffle, batch, repeat, shard
among the workers, skip the batches already trained. A skip outside the repeat happens once
(inside it, every epoch), and a shuffle must be inside the repeat (a shuffle of an endless
sampler never ends).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch.utils.data

__all__ = [
    "DistributedBatchSampler",
    "DistributedSampler",
    "RepeatBatchSampler",
    "RepeatSampler",
    "ReproducibleShuffleBatchSampler",
    "ReproducibleShuffleSampler",
    "SkipBatchSampler",
    "SkipSampler",
]


def _shard_length(length: int, num_workers: int, rank: int) -> int:
    """Items ``rank`` gets of ``length`` dealt round-robin: the first ``length %
    num_workers`` ranks get one more."""
    return length // num_workers + int(length % num_workers > rank)


def _every_nth(items: Iterable[Any], num_workers: int, rank: int) -> Iterator[Any]:
    for i, item in enumerate(items):
        if i % num_workers == rank:
            yield item


def _after(items: Iterable[Any], skip: int) -> Iterator[Any]:
    iterator = iter(items)
    for _ in range(skip):
        if next(iterator, _END) is _END:
            return
    yield from iterator


_END = object()


def _shuffled(items: Iterable[Any], rng: Any) -> Iterator[Any]:
    listed = list(items)
    rng.shuffle(listed)
    return iter(listed)


def _random_state(seed: int) -> Any:
    try:
        import numpy as np
    except ImportError:
        raise ImportError("determined.pytorch.samplers' shuffles draw from numpy's "
                          "RandomState, as Determined's do: pip install numpy in the trial's "
                          "environment") from None
    return np.random.RandomState(seed)


class RepeatSampler(torch.utils.data.Sampler[Any]):
    """The samples of ``sampler``, over and over without end; its length is the
    underlying one (one epoch)."""

    def __init__(self, sampler: Any) -> None:
        self._sampler = sampler

    def __len__(self) -> int:
        return len(self._sampler)

    def __iter__(self) -> Iterator[Any]:
        while True:
            yield from self._sampler


class RepeatBatchSampler(torch.utils.data.BatchSampler):
    """The batches of ``batch_sampler``, over and over without end; its length is the
    underlying one (one epoch)."""

    def __init__(self, batch_sampler: Any) -> None:
        self.batch_sampler = batch_sampler

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator[Any]:
        while True:
            yield from self.batch_sampler


class DistributedSampler(torch.utils.data.Sampler[Any]):
    """Worker ``rank``'s samples of ``sampler``: every ``num_workers``-th, from the
    ``rank``-th on. Unlike torch's DistributedSampler it neither shuffles nor pads, and
    its input may change length: ranks below ``len % num_workers`` get one more."""

    def __init__(self, sampler: Any, num_workers: int, rank: int) -> None:
        self._sampler = sampler
        self._num_workers = num_workers
        self._rank = rank

    def __len__(self) -> int:
        return _shard_length(len(self._sampler), self._num_workers, self._rank)

    def __iter__(self) -> Iterator[Any]:
        return _every_nth(self._sampler, self._num_workers, self._rank)


class DistributedBatchSampler(torch.utils.data.BatchSampler):
    """Worker ``rank``'s batches of ``batch_sampler``: every ``num_workers``-th, from the
    ``rank``-th on. On a finite batch sampler whose length does not divide, lower ranks get
    one batch more (harmless in validation; training repeats first).

    Raises:
        ValueError: ``rank`` is not in ``[0, num_workers)``.
    """

    def __init__(self, batch_sampler: Any, num_workers: int, rank: int) -> None:
        if rank < 0:
            raise ValueError("rank must be non-negative.")
        if num_workers < 1:
            raise ValueError("num_workers must be greater than zero.")
        if rank >= num_workers:
            raise ValueError("rank must be less than num_workers.")
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.rank = rank

    def __len__(self) -> int:
        return _shard_length(len(self.batch_sampler), self.num_workers, self.rank)

    def __iter__(self) -> Iterator[Any]:
        return _every_nth(self.batch_sampler, self.num_workers, self.rank)


class SkipSampler(torch.utils.data.BatchSampler):
    """The samples of ``sampler`` after its first ``skip``. Its length stays the
    underlying one: it is meant for training data, around a repeated sampler.

    Prefer :class:`SkipBatchSampler` to resume: hpcdet and Determined count batches
    trained, not records, so records to skip are only known when every batch is full.
    """

    def __init__(self, sampler: Any, skip: int) -> None:
        self._sampler = sampler
        self._skip = skip

    def __len__(self) -> int:
        return len(self._sampler)

    def __iter__(self) -> Iterator[Any]:
        return _after(self._sampler, self._skip)


class SkipBatchSampler(torch.utils.data.BatchSampler):
    """The batches of ``batch_sampler`` after its first ``skip``. Its length stays the
    underlying one: it is meant for training data, around a repeated batch sampler."""

    def __init__(self, batch_sampler: Any, skip: int) -> None:
        self.batch_sampler = batch_sampler
        self.skip = skip
        self.length = len(batch_sampler)

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator[Any]:
        return _after(self.batch_sampler, self.skip)


class ReproducibleShuffleSampler(torch.utils.data.Sampler[Any]):
    """The samples of ``sampler`` in an order drawn from ``numpy.random.RandomState(seed)``:
    the same sequence of epoch orders for the same seed (each pass draws the next)."""

    def __init__(self, sampler: Any, seed: int) -> None:
        self._sampler = sampler
        self._rng = _random_state(seed)

    def __iter__(self) -> Iterator[Any]:
        return _shuffled(self._sampler, self._rng)

    def __len__(self) -> int:
        return len(self._sampler)


class ReproducibleShuffleBatchSampler(torch.utils.data.Sampler[Any]):
    """The batches of ``batch_sampler`` in an order drawn from
    ``numpy.random.RandomState(seed)``; the batches keep their records (shuffling records
    with :class:`ReproducibleShuffleSampler` mixes better)."""

    def __init__(self, batch_sampler: Any, seed: int) -> None:
        self._batch_sampler = batch_sampler
        self._rng = _random_state(seed)

    def __iter__(self) -> Iterator[Any]:
        return _shuffled(self._batch_sampler, self._rng)

    def __len__(self) -> int:
        return len(self._batch_sampler)
