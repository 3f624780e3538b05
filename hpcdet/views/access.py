"""Read access to the database for the CLI and the SDK: it lives on the daemon's host."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hpcdet.paths import StatePaths
from hpcdet.protocol import process
from hpcdet.store.reads import Reads as Reads

if TYPE_CHECKING:
    from hpcdet.store.queries import Queries as Queries


def _database(p: StatePaths) -> tuple[Path, bool]:
    """The database's path, and whether it is the daemon's copy for another host; the daemon
    is started if there is none yet."""
    current = process.info(p)
    if current.alive and not current.here:
        # Its database is on the local disk of the daemon's host (a login node, or a
        # compute node under `daemon supervise --via job`): it copies it for this one.
        from hpcdet.protocol.calls import call
        from hpcdet.protocol.messages import CopyDatabase, encode

        op, args = encode(CopyDatabase())
        return Path(str(call(p, op, args))), True
    database = p.database()
    if not database.exists() or not current.here:
        # None yet here, or the daemon's host is gone: a daemon here rebuilds it from the
        # run tree and takes the experiments over.
        process.start(p)
    return database, False


def read_store(p: StatePaths) -> Queries:
    """The database, read-only; the daemon is started if there is none yet."""
    # SQLAlchemy is imported by the commands that use the ORM, not by every CLI start.
    from hpcdet.store.queries import Queries

    return Queries(*_database(p))


def open_database(p: StatePaths) -> Queries:
    """The database, read-only, as it is now (the daemon is not started)."""
    from hpcdet.store.queries import Queries

    return Queries(p.database())


def open_reads(p: StatePaths) -> Reads:
    """The database, read-only, for the views that read it without the ORM (listings and
    `describe`); the daemon is started if there is none yet."""
    return Reads(*_database(p))


def away(p: StatePaths) -> bool:
    """Whether the daemon runs on another host: its database reaches this one as copies."""
    current = process.info(p)
    return current.alive and not current.here


def reads_here(p: StatePaths) -> Reads | None:
    """The database as this host has it, asking nothing of a daemon and starting none: None
    when it lives on another host or does not exist yet (for what can do without it, such as
    `experiment create`'s estimate, which must not hold up the create)."""
    database = p.database()
    if away(p) or not database.exists():
        return None
    return Reads(database, False)
