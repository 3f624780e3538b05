"""Planning the job arrays of a search (pure).

All trials of a search go into job arrays: task k of an array runs search request
``offset + k``. Sites cap arrays (``MaxArraySize``: indices must stay below it) and job counts
(``MaxJobCount``, a QOS's ``MaxSubmitJobs``, hpcdet's ``max_jobs``), so a large search is split
into several arrays by request range, and the next one is submitted only once the previous
one has no task left waiting: that keeps the user under the submit limit and, apart from the
moment two arrays overlap, within the search's concurrency.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Chunk:
    offset: int
    count: int


def slot_room(trials_at_once: int | None, array_tasks: int, singles: int
              ) -> tuple[int | None, bool]:
    """resources.max_slots over an experiment's live jobs: (how many tasks at once a new
    array may run, 0 meaning it must wait, None no cap; whether one more single job may go).

    The batch system starts an array's pending tasks up to its throttle whenever it likes, so
    a single job goes only once no task of the experiment's arrays is live, and an array's
    throttle leaves room for the single jobs already there: together they never exceed the
    cap, at the price of restarts waiting for the array to drain.
    """
    if trials_at_once is None:
        return None, True
    return max(0, trials_at_once - singles), array_tasks == 0 and singles < trials_at_once


def tasks_waiting(array_job_id: str, pending: Iterable[str],
                  array_of: Callable[[str], str]) -> bool:
    """Whether any of the ``pending`` job ids is a task of the array ``array_job_id``, by the
    backend's ``array_of`` (Slurm's ``12_3`` of ``12``, PBS's ``12[3].server`` of
    ``12[].server``); the array's own id is not one of its tasks."""
    return any(job_id != array_job_id and array_of(job_id) == array_job_id
               for job_id in pending)


def next_chunk(
    bound: int,
    covered: int,
    previous_pending: bool,
    max_array_size: int | None,
    job_headroom: int | None,
) -> Chunk | None:
    """The next array to submit, or None.

    Args:
        bound: the most trials the search can create.
        covered: requests already covered by submitted arrays (they cover 0..covered-1).
        previous_pending: whether the last submitted array still has tasks waiting to start.
        max_array_size: the scheduler's MaxArraySize (array indices must be below it).
        job_headroom: how many more jobs the user may submit now (None: no known limit).
    """
    if covered >= bound or previous_pending:
        return None
    count = bound - covered
    if max_array_size:
        count = min(count, max_array_size)
    if job_headroom is not None:
        count = min(count, job_headroom)
    return Chunk(covered, count) if count > 0 else None


def owner(request_id: int, chunks: Sequence[tuple[str, int, int]]) -> tuple[str, int] | None:
    """(array job id, task index) of the array covering ``request_id``.

    ``chunks`` are (job id, offset, count) triples.
    """
    for job_id, offset, count in chunks:
        if offset <= request_id < offset + count:
            return job_id, request_id - offset
    return None
