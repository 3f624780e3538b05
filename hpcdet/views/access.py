"""Read access to the database for the CLI and the SDK: it lives on the daemon's host."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hpcdet.errors import DaemonError
from hpcdet.paths import StatePaths
from hpcdet.protocol import process
from hpcdet.store.reads import Reads as Reads

if TYPE_CHECKING:
    from hpcdet.store.queries import Queries as Queries


def _database(p: StatePaths) -> Path:
    """The database's path; the daemon is started if there is none yet."""
    current = process.info(p)
    if current.record and not current.here:
        raise DaemonError(
            f"the database of {p.root} is on host {current.record['host']}, where the daemon "
            f"runs (pid {current.record['pid']}); run this command there"
        )
    database = p.database()
    if not database.exists():
        process.start(p)
    return database


def read_store(p: StatePaths) -> Queries:
    """The database, read-only; the daemon is started if there is none yet."""
    # SQLAlchemy is imported by the commands that use the ORM, not by every CLI start.
    from hpcdet.store.queries import Queries

    return Queries(_database(p))


def open_database(p: StatePaths) -> Queries:
    """The database, read-only, as it is now (the daemon is not started)."""
    from hpcdet.store.queries import Queries

    return Queries(p.database())


def open_reads(p: StatePaths) -> Reads:
    """The database, read-only, for the views that read it without the ORM (listings and
    `describe`); the daemon is started if there is none yet."""
    return Reads(_database(p))
