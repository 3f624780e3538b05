"""The SQLite database of one state directory, as SQLAlchemy reaches it: its engine, held to
the oldest SQLite's limits, and one session per unit of work.

Contract: only the daemon writes (it holds the daemon lock; ``hpcdet.store.repository``);
other processes open the database read-only (``hpcdet.store.queries``). Every write happens
inside one ``session()`` that commits or rolls back as a whole, so a daemon killed at any
instant leaves either all of a change or none of it. The database must be on local disk (see
``hpcdet.paths.StatePaths.local_dir``).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, create_engine

from hpcdet.errors import StoreError
from hpcdet.private import close_file, open_private
from hpcdet.store.limits import hold_to_oldest_limit


def make_engine(path: Path, readonly: bool, immutable: bool = False) -> Engine:
    """``immutable``: a file nothing changes while it is open (the daemon's copy for readers
    on other hosts, replaced whole), read without locks, which a network filesystem may not
    keep."""
    if readonly:
        url = f"sqlite:///file:{path}?mode=ro{'&immutable=1' * immutable}&uri=true"
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Created 0600 before SQLite does (0644 less the umask: 0640 when the cluster config
        # shares with a group); SQLite gives its -wal and -shm the database file's mode. A
        # group member who could open them could lock the daemon out (issue 37).
        if not path.exists():
            os.close(open_private(path))
        for suffix in ("", "-wal", "-shm", "-journal"):
            close_file(path.with_name(path.name + suffix))
        url = f"sqlite:///{path}"
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        if not readonly:
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()
        hold_to_oldest_limit(dbapi_conn)

    return engine



class Database:
    """An open database: its path and engine, and its sessions."""

    path: Path
    engine: Engine

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as s:
            try:
                yield s
                s.commit()
            except (SQLAlchemyError, sqlite3.Error) as e:  # sqlite3's: statements sent raw
                s.rollback()
                raise StoreError(
                    f"database error in {self.path}: {e.__class__.__name__}: {e}. The run tree "
                    "still holds everything: restart the daemon (`hpcdet daemon stop`, then "
                    "`hpcdet daemon start`); it sets a damaged database aside and rebuilds it."
                ) from e

    def close(self) -> None:
        self.engine.dispose()
