"""``det.pytorch.DataLoader``: torch's DataLoader, planned so training can stop and resume.

The order of every epoch is a pure function of the trial seed and the epoch number
(:func:`epoch_batches`), and each worker's share of it another (:func:`shard`), so a trial
resumed at step ``s`` sees exactly the batches an uninterrupted one would have seen from
``s`` on. One step is one per-slot batch on each of the trial's ``replicas`` workers: a global
batch. An epoch whose batch count does not divide by ``replicas`` is padded, in training, with
its own first batches (as torch's DistributedSampler pads with the first samples), so every
worker takes part in every step; in validation nothing is padded and workers may get one
batch fewer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch
import torch.utils.data

Batches = list[list[int]]


def epoch_batches(
    num_records: int, batch_size: int, *, shuffle: bool, drop_last: bool, seed: int, epoch: int
) -> Batches:
    """The per-slot batches (record indices) of one epoch, in order."""
    if not shuffle:
        return _cut(list(range(num_records)), batch_size, drop_last)
    # A generator of its own (torch's global one is the trial's), seeded by seed and epoch.
    generator = torch.Generator().manual_seed((seed * 1_000_003 + epoch) % 2**63)
    return _cut(torch.randperm(num_records, generator=generator).tolist(), batch_size,
                drop_last)


def group(indices: Iterable[int], batch_size: int, drop_last: bool) -> Batches:
    """``indices`` cut into batches of ``batch_size``; the short last one kept unless
    ``drop_last``."""
    return _cut([int(i) for i in indices], batch_size, drop_last)


def _cut(indices: list[int], batch_size: int, drop_last: bool) -> Batches:
    end = len(indices) - len(indices) % batch_size if drop_last else len(indices)
    return [indices[i:i + batch_size] for i in range(0, end, batch_size)]


def steps_per_epoch(num_batches: int, replicas: int) -> int:
    """Global batches (steps) in a training epoch of ``num_batches`` per-slot batches."""
    return math.ceil(num_batches / replicas)


def shard(batches: Sequence[list[int]], replicas: int, rank: int, *, pad: bool) -> Batches:
    """Worker ``rank``'s batches: every ``replicas``-th, starting at its rank.

    With ``pad`` (training), the epoch is first filled up to a multiple of ``replicas`` with
    its own first batches, so every worker gets ``steps_per_epoch`` of them.
    """
    if pad and batches:
        missing = -len(batches) % replicas
        batches = [*batches, *(batches[i % len(batches)] for i in range(missing))]
    return [list(b) for b in batches[rank::replicas]]


class _PlannedBatches(torch.utils.data.Sampler[list[int]]):
    """The batch sampler torch's DataLoader iterates: one worker's batches from a given step.

    Training (``repeat``) yields forever, epoch after epoch; validation yields one epoch.
    """

    def __init__(
        self, loader: DataLoader, *, replicas: int, rank: int, repeat: bool, start_step: int,
        seed: int,
    ) -> None:
        self._loader = loader
        self._replicas = replicas
        self._rank = rank
        self._repeat = repeat
        self._start = start_step
        self._seed = seed

    def epoch(self, epoch: int) -> Batches:
        return shard(self._loader.plan(epoch, self._seed), self._replicas, self._rank,
                     pad=self._repeat)

    def __iter__(self) -> Iterator[list[int]]:
        if not self._repeat:
            yield from self.epoch(0)
            return
        per_epoch = self._loader.steps_per_epoch(self._replicas, self._seed)
        epoch, skip = divmod(self._start, per_epoch)
        while True:
            yield from self.epoch(epoch)[skip:]
            epoch, skip = epoch + 1, 0

    def __len__(self) -> int:
        if self._repeat:
            return self._loader.steps_per_epoch(self._replicas, self._seed)
        return len(self.epoch(0))


class DataLoader:
    """Determined's DataLoader: the arguments of ``torch.utils.data.DataLoader``, applied
    by the trial's loop, which adds the sharding among workers and the resumable position.

    ``batch_size`` should be ``context.get_per_slot_batch_size()``. ``sampler`` (iterated
    once per epoch, with ``set_epoch(epoch)`` when it has one) and ``batch_sampler`` replace
    the seeded order; a trial resumes exactly only if they, too, repeat their order.

    Raises:
        ValueError: Conflicting arguments, as torch's DataLoader would name them.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool = False,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Any = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Any = None,
        multiprocessing_context: Any = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
    ) -> None:
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None
                                          or drop_last):
            raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                             "shuffle, sampler, and drop_last")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is None and (not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"batch_size must be a positive integer, not {batch_size!r}")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.drop_last = drop_last
        self.num_workers = num_workers
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.pin_memory_device = pin_memory_device
        self._plans: dict[tuple[int, int], Batches] = {}

    def plan(self, epoch: int, seed: int) -> Batches:
        """Every per-slot batch of ``epoch``, in order (the last two epochs are kept)."""
        key = (seed, epoch)
        if key not in self._plans:
            self._plans = {k: v for k, v in self._plans.items() if k[1] >= epoch - 1}
            self._plans[key] = self._make_plan(epoch, seed)
        return self._plans[key]

    def _make_plan(self, epoch: int, seed: int) -> Batches:
        for source in (self.sampler, self.batch_sampler):
            if source is not None and hasattr(source, "set_epoch"):
                source.set_epoch(epoch)
        if self.batch_sampler is not None:
            return [list(map(int, b)) for b in self.batch_sampler]
        assert self.batch_size is not None
        if self.sampler is not None:
            return group(self.sampler, self.batch_size, self.drop_last)
        return epoch_batches(len(self.dataset), self.batch_size, shuffle=self.shuffle,
                             drop_last=self.drop_last, seed=seed, epoch=epoch)

    def steps_per_epoch(self, replicas: int, seed: int = 0) -> int:
        """Global batches per training epoch with ``replicas`` workers."""
        return steps_per_epoch(len(self.plan(0, seed)), replicas)

    def __len__(self) -> int:
        """Per-slot batches in one epoch (all workers together)."""
        return len(self.plan(0, 0))

    def __iter__(self) -> Iterator[Any]:
        """One epoch in order, on one worker (as iterating Determined's DataLoader does)."""
        return iter(self.get_data_loader())

    def get_data_loader(
        self, *, repeat: bool = False, skip: int = 0, num_replicas: int = 1, rank: int = 0,
        seed: int = 0,
    ) -> torch.utils.data.DataLoader[Any]:
        """The torch DataLoader of worker ``rank`` of ``num_replicas``.

        Args:
            repeat: Training: epoch after epoch without end, padded (see :func:`shard`).
            skip: Steps (global batches) already trained; the loader starts after them.
            seed: The trial seed, which orders shuffled epochs.
        """
        batches = _PlannedBatches(self, replicas=num_replicas, rank=rank, repeat=repeat,
                                  start_step=skip, seed=seed)
        # The workers' base seed comes from this generator, not from torch's global one, so
        # building the loader at a resumption draws nothing the uninterrupted run did not.
        generator = self.generator or torch.Generator().manual_seed(seed * 1_000_003 + skip)
        kwargs: dict[str, Any] = {}
        if self.num_workers > 0:
            kwargs["prefetch_factor"] = self.prefetch_factor
            kwargs["persistent_workers"] = self.persistent_workers
        return torch.utils.data.DataLoader(
            self.dataset,
            batch_sampler=batches,
            num_workers=self.num_workers,
            collate_fn=self.collate_fn,
            pin_memory=self.pin_memory,
            timeout=self.timeout,
            worker_init_fn=self.worker_init_fn,
            multiprocessing_context=self.multiprocessing_context,
            generator=generator,
            pin_memory_device=self.pin_memory_device,
            **kwargs,
        )
