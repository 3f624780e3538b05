"""What hpcdet asks of SQLite, held to its oldest version that hpcdet supports.

SQLite before 3.32 (RHEL 8 has 3.26, Ubuntu 20.04 3.31) binds at most 999 variables in a
statement. Every connection is held to that limit where Python can set it (3.11+), so that a
statement over it fails in hpcdet's own tests rather than on a user's login node.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

SQL_VARIABLES = 999
# Ids bound in one "IN (...)", with room left for a statement's other variables.
IDS_PER_STATEMENT = 500


def hold_to_oldest_limit(conn: sqlite3.Connection) -> None:
    """Make the connection refuse statements that SQLite before 3.32 would refuse."""
    setlimit = getattr(conn, "setlimit", None)  # Python 3.11+
    if setlimit is not None:
        setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, SQL_VARIABLES)


def parts(ids: Iterable[int]) -> list[list[int]]:
    """The ids, sorted and without repeats, in parts that one statement can bind. Each part's
    ids are above the last part's, so rows asked part by part in id order stay in order."""
    ordered = sorted(set(ids))
    return [ordered[i:i + IDS_PER_STATEMENT]
            for i in range(0, len(ordered), IDS_PER_STATEMENT)]
