"""Determined's job priority (1..99, lower is more important, 42 by default) on a batch
scheduler where an unprivileged user can only lower the priority of their own jobs.

The default priority costs nothing against other users' jobs; a number above 42 lowers the
job's scheduler priority in proportion (Slurm: a positive nice); a number below 42 cannot
raise it above other users' jobs, only move it ahead of the user's own (Slurm: `scontrol
top`).
"""

from __future__ import annotations

DEFAULT_PRIORITY = 42
NICE_PER_STEP = 100  # Slurm nice units per Determined priority step above the default


def validate(priority: int) -> int:
    if not 1 <= priority <= 99:
        raise ValueError(f"priority must be between 1 and 99 (lower is more important), "
                         f"not {priority}")
    return priority


def nice_for(priority: int | None) -> int:
    """The scheduler nice value for a Determined priority (0 for the default and above)."""
    if priority is None or priority <= DEFAULT_PRIORITY:
        return 0
    return (priority - DEFAULT_PRIORITY) * NICE_PER_STEP


def wants_top(priority: int | None) -> bool:
    """Whether the job should move ahead of the user's own other jobs."""
    return priority is not None and priority < DEFAULT_PRIORITY
