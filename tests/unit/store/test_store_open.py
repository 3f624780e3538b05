"""A database that is not SQLite, is damaged, or lacks columns of its schema is set aside when
the daemon opens it, and the daemon rebuilds it from the run tree instead of failing to start."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.loop import Daemon
from hpcdet.errors import StoreError
from hpcdet.paths import StatePaths
from hpcdet.schedulers.runner import CommandRunner, Result
from hpcdet.store.entries import ExperimentCreated, TrialCreated
from hpcdet.store.queries import Queries
from hpcdet.store.repository import SCHEMA_VERSION, Store


class NoSlurm(CommandRunner):
    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        return Result("", "", 0)


def _daemon(paths: StatePaths) -> Daemon:
    return Daemon(paths, ClusterConfig(backend="slurm"), NoSlurm())


def _journaled(paths: StatePaths) -> None:
    daemon = _daemon(paths)
    config = {"name": "x", "entrypoint": "true",
              "searcher": {"name": "single", "metric": "x", "max_length": 1}}
    daemon.journal.record(1, ExperimentCreated(name="kept", config=config,
                          backend="slurm", searcher="single"))
    daemon.journal.record(1, TrialCreated(trial_id=1, hparams={"lr": 0.1}, trial_seed=0))
    daemon.store.close()


def _set_aside(paths: StatePaths) -> list[Path]:
    return sorted(paths.database().parent.glob("hpcdet.db.corrupt-*"))


def _rebuilt(paths: StatePaths) -> None:
    daemon = _daemon(paths)
    daemon.reconcile()
    assert [e.name for e in daemon.store.experiments()] == ["kept"]
    # The journal holds no searcher entries, so the rebuilt daemon also starts the search
    # (a second trial): what matters is that the journaled trial came back.
    assert daemon.store.trial(1).hparams == {"lr": 0.1}


def test_a_garbage_file_as_database_is_set_aside_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    paths = StatePaths(tmp_path)
    _journaled(paths)
    garbage = b"this is no database\n" * 300
    paths.database().write_bytes(garbage)
    _rebuilt(paths)
    [aside] = _set_aside(paths)
    assert aside.read_bytes() == garbage
    assert "is not a valid SQLite database" in caplog.text and str(aside) in caplog.text


def test_a_damaged_database_is_set_aside_and_rebuilt(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    _journaled(paths)
    data = bytearray(paths.database().read_bytes())
    assert len(data) > 3 * 4096
    data[4096:3 * 4096] = b"\xa5" * (2 * 4096)  # pages of tables and indexes overwritten
    paths.database().write_bytes(bytes(data))
    _rebuilt(paths)
    assert len(_set_aside(paths)) == 1


def test_a_database_without_the_columns_of_its_schema_is_set_aside(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    _journaled(paths)
    paths.database().unlink()
    conn = sqlite3.connect(paths.database())
    conn.execute("CREATE TABLE experiment (id INTEGER PRIMARY KEY)")
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    conn.commit()
    conn.close()
    _rebuilt(paths)
    assert len(_set_aside(paths)) == 1


def test_a_sound_database_is_kept(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    _journaled(paths)
    Store(paths.database()).close()
    assert _set_aside(paths) == []


def test_a_reader_of_a_garbage_database_is_told_to_restart_the_daemon(tmp_path: Path) -> None:
    path = tmp_path / "hpcdet.db"
    path.write_bytes(b"this is no database\n" * 300)
    store = Queries(path)
    with pytest.raises(StoreError, match="restart the daemon.*sets a damaged database aside"):
        store.experiments()
    assert path.read_bytes().startswith(b"this is no database")


def test_a_reader_gets_the_queries_and_none_of_the_daemon_s_writes(tmp_path: Path) -> None:
    """One query API for every reader, one write API the daemon alone holds (issue 40)."""
    paths = StatePaths(tmp_path / "state")
    Store(paths.database()).close()
    reader = Queries(paths.database())
    assert not isinstance(reader, Store) and reader.experiments() == []
    writes = {"apply_journal", "ingest_runs", "ingest_events", "set_run_states",
              "discard_experiment"}
    assert writes <= set(dir(Store)) and not writes & set(dir(reader))
    with pytest.raises(StoreError, match="no database at"):
        Queries(tmp_path / "nowhere.db")
