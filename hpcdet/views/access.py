"""Read access to the database for the CLI and the SDK: it lives on the daemon's host."""

from __future__ import annotations

from hpcdet.daemon import process
from hpcdet.errors import DaemonError
from hpcdet.paths import StatePaths
from hpcdet.store.repository import Store


def read_store(p: StatePaths) -> Store:
    """The database, read-only; the daemon is started if there is none yet."""
    current = process.info(p)
    if current.record and not current.here:
        raise DaemonError(
            f"the database of {p.root} is on host {current.record['host']}, where the daemon "
            f"runs (pid {current.record['pid']}); run this command there"
        )
    if not p.database().exists():
        process.start(p)
    return Store(p.database(), readonly=True)
