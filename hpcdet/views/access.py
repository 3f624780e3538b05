"""Read access to the database for the CLI and the SDK: it lives on the daemon's host."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hpcdet.errors import DaemonError
from hpcdet.paths import StatePaths
from hpcdet.protocol import process
from hpcdet.store.reads import Reads as Reads

if TYPE_CHECKING:
    from hpcdet.store.repository import Store as Store


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


def read_store(p: StatePaths) -> Store:
    """The database, read-only; the daemon is started if there is none yet."""
    # SQLAlchemy is imported by the commands that use the ORM, not by every CLI start.
    from hpcdet.store.repository import Store

    return Store(_database(p), readonly=True)


def open_database(p: StatePaths) -> Store:
    """The database, read-only, as it is now (the daemon is not started)."""
    from hpcdet.store.repository import Store

    return Store(p.database(), readonly=True)


def open_reads(p: StatePaths) -> Reads:
    """The database, read-only, for the views that read it without the ORM (listings and
    `describe`); the daemon is started if there is none yet."""
    return Reads(_database(p))
