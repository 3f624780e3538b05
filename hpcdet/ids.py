"""Ids of experiments and trials: SQLite integers, so whole numbers from 1 to 2**63 - 1.

Checked where they enter (the CLI's arguments, the daemon's requests), since SQLite cannot
even look up a larger one.
"""

from __future__ import annotations

from hpcdet.config.schema import INT64_MAX as MAX_ID
from hpcdet.errors import UsageError


def id_problem(value: object) -> str | None:
    """Why ``value`` is no id, or None when it is one."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_ID:
        return None
    shown = value if isinstance(value, int) else repr(value)
    return f"ids are whole numbers from 1 to {MAX_ID}, not {shown}"


def check_id(what: str, value: object) -> int:
    """``value`` as an id, or a UsageError naming ``what``."""
    problem = id_problem(value)
    if problem is not None:
        raise UsageError(f"{what}: {problem}")
    assert isinstance(value, int)
    return value
