"""The trial's two loaders as the loop uses them: hpcdet's ``DataLoader`` (planned, sharded
and skippable, so a resumed trial sees the same data order) or, once the trial has called
``context.experimental.disable_dataset_reproducibility_checks()``, a loader of its own."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator
from typing import Any

from hpcdet.pytorch._data import DataLoader


def check_loaders(train: Any, val: Any, checked: bool) -> None:
    """Raises ``TypeError`` for a loader that is not a ``DataLoader`` while ``checked``."""
    if not checked:
        return
    for name, loader in (("build_training_data_loader", train),
                         ("build_validation_data_loader", val)):
        if not isinstance(loader, DataLoader):
            raise TypeError(
                f"{name}() returned an instance of {type(loader).__name__}, which is not a "
                "det.pytorch.DataLoader; build it with det.pytorch.DataLoader(dataset, "
                "batch_size=context.get_per_slot_batch_size(), ...), or call "
                "context.experimental.disable_dataset_reproducibility_checks() to train "
                "on a loader of your own"
            )


def epoch_length(train: Any, replicas: int, seed: int, broadcast: Callable[[int], Any]) -> int:
    """Batches per epoch for each worker."""
    if isinstance(train, DataLoader):
        return train.steps_per_epoch(replicas, seed)
    # As Determined: every worker takes the chief's length; none means no epochs.
    try:
        own = len(train)
    except TypeError:
        own = sys.maxsize
    return int(broadcast(own))


def training_batches(train: Any, skip: int, replicas: int, rank: int,
                     seed: int) -> Iterator[Any]:
    """This worker's training batches, epoch after epoch, from batch ``skip`` on."""
    if isinstance(train, DataLoader):
        return iter(train.get_data_loader(repeat=True, skip=skip, num_replicas=replicas,
                                          rank=rank, seed=seed))
    # The trial's own loader: where it starts after a resumption is its own affair.
    return itertools.chain.from_iterable(itertools.repeat(train))


def validation_batches(val: Any, replicas: int, rank: int, seed: int) -> Any:
    """This worker's share of the validation data, once."""
    if not isinstance(val, DataLoader):
        return val
    return val.get_data_loader(repeat=False, num_replicas=replicas, rank=rank, seed=seed)


def timing(verb: str, seconds: float, records: int, batches: int) -> str:
    """A log line of records and batches over ``seconds`` and their rates."""
    per = 1 / seconds if seconds > 0 else float("inf")
    return (f"{verb}: {records} records in {seconds:.3g}s ({records * per:.3g} records/s), "
            f"in {batches} batches ({batches * per:.3g} batches/s)")
