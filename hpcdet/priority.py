"""Determined's job priority (1..99, lower is more important, 42 by default) and queue order
on a batch scheduler where an unprivileged user can only lower the priority of their own jobs.

The default priority costs nothing against other users' jobs: such a job has nice 0. A number
above 42 lowers the job's scheduler priority in proportion (Slurm: a positive nice). Among the
user's own pending jobs, hpcdet's order (priority, then queue position, which `--ahead-of` and
`--behind-of` move) is made Slurm's by giving each job the smallest nice that sorts it just
behind the jobs hpcdet puts ahead of it in the same partition. That extra nice lasts only
while one of those jobs is still pending: once they start, the job is back at its own value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

DEFAULT_PRIORITY = 42
NICE_PER_STEP = 100  # Slurm nice units per Determined priority step above the default


class Queued(Protocol):
    """An experiment as hpcdet's queue orders it."""

    @property
    def id(self) -> int: ...
    @property
    def priority(self) -> int | None: ...
    @property
    def position(self) -> float: ...


def queue_key(exp: Queued) -> tuple[int, float, int]:
    """hpcdet's own order of experiments: priority, then queue position."""
    return (exp.priority or DEFAULT_PRIORITY, exp.position, exp.id)


def validate(priority: int) -> int:
    if not 1 <= priority <= 99:
        raise ValueError(f"priority must be between 1 and 99 (lower is more important), "
                         f"not {priority}")
    return priority


def nice_for(priority: int | None, per_step: int = NICE_PER_STEP) -> int:
    """The scheduler nice value for a Determined priority (0 for the default and above);
    ``per_step``: the scheduler's units per priority step (``Scheduler.nice_per_step``)."""
    if priority is None or priority <= DEFAULT_PRIORITY:
        return 0
    return (priority - DEFAULT_PRIORITY) * per_step


@dataclass(frozen=True)
class PendingJob:
    """One pending scheduler job of an hpcdet experiment, as the status query showed it."""

    job_id: str  # numeric on Slurm; an array's pending part has its array's id
    partition: str
    priority: int  # Determined priority of its experiment
    position: float  # the experiment's place in hpcdet's queue
    scheduler_priority: int  # Slurm's number now (higher starts first)
    nice: int  # its nice value now


def job_number(job_id: str) -> int:
    """The number a job id starts with (Slurm ``123``, PBS ``123[].server``)."""
    digits = job_id[:len(job_id) - len(job_id.lstrip("0123456789"))]
    return int(digits) if digits else 0


def plan_nice(jobs: Sequence[PendingJob], per_step: int = NICE_PER_STEP) -> dict[str, int]:
    """The nice value each pending job should have so that Slurm starts them in hpcdet's order.

    Slurm starts the higher priority first and, on a tie, the lower job id. A job's priority
    before nice is ``scheduler_priority + nice``; the plan keeps that and chooses the nice.
    """
    plan: dict[str, int] = {}
    by_partition: dict[str, list[PendingJob]] = {}
    for job in jobs:
        by_partition.setdefault(job.partition, []).append(job)
    for group in by_partition.values():
        group.sort(key=lambda j: (j.priority, j.position, job_number(j.job_id)))
        last: tuple[int, int] | None = None  # Slurm's sort key of the last job placed
        for job in group:
            raw = job.scheduler_priority + job.nice
            nice = nice_for(job.priority, per_step)
            number = job_number(job.job_id)
            if last is not None:
                # Needs (nice - raw, number) > last: behind it on priority or, tied, on id.
                floor = last[0] + raw + (0 if number > last[1] else 1)
                nice = max(nice, floor)
            plan[job.job_id] = nice
            last = (nice - raw, number)
    return plan


def position_between(before: float | None, after: float | None) -> float:
    """A queue position between two neighbours (None: no neighbour on that side)."""
    if before is None and after is None:
        return 0.0
    if before is None:
        assert after is not None
        return after - 1.0
    if after is None:
        return before + 1.0
    return (before + after) / 2.0
