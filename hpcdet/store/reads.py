"""The CLI's read path: the rows that listings and `describe` show, read with the standard
library's sqlite3 and returned as typed records.

Starting SQLAlchemy and SQLModel costs a CLI command more than its query, and the ORM builds
an object per row; a listing of thousands of experiments needs neither. The records carry the
tables' columns in the models' order (a test keeps them equal), and a record's ``to_dict()`` is
the model's ``model_dump()``. Read-only like ``Store(readonly=True)``: the database is opened
with ``mode=ro``, never written, and in WAL mode each query sees the last commit of the daemon,
the only writer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypeVar

from hpcdet.errors import NotFoundError, StoreError
from hpcdet.states import TrialState
from hpcdet.store.limits import hold_to_oldest_limit

if TYPE_CHECKING:
    from hpcdet.store.repository import Store


@dataclass(frozen=True)
class _Record:
    """A row of one table, its columns in the model's order."""

    # SQLite stores booleans as 0 and 1; the ORM reads them back as bool, and so do records.
    _booleans: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        """The columns by name, as the model's ``model_dump()`` gives them."""
        return {name: getattr(self, name) for name in _names(type(self))}


@dataclass(frozen=True)
class ExperimentRecord(_Record):
    _booleans: ClassVar[tuple[str, ...]] = ("archived", "searcher_done")

    id: int
    name: str
    state: str
    config_json: str
    description: str
    labels_json: str
    archived: bool
    resource_pool: str
    priority: int | None
    weight: float
    position: float
    backend: str
    searcher: str
    created: float
    ended: float | None
    journal_offset: int
    progress: float
    actions_done: int
    searcher_done: bool
    error: str


@dataclass(frozen=True)
class TrialRecord(_Record):
    _booleans: ClassVar[tuple[str, ...]] = ("closed", "stop_requested", "exit_reported")

    id: int
    experiment_id: int
    request_id: int
    ops_json: str
    ops_completed: int
    closed: bool
    stop_requested: bool
    early_exit: str
    exit_reported: bool
    state: str
    hparams_json: str
    trial_seed: int
    restarts: int
    run_id: int
    latest_checkpoint: str | None
    steps_completed: int
    progress: float
    status: str
    metadata_json: str
    alerts_json: str
    best_validation: float | None
    end_reason: str
    started: float | None
    ended: float | None


@dataclass(frozen=True)
class RunRecord(_Record):
    _booleans: ClassVar[tuple[str, ...]] = ("preempt_acked",)

    id: int | None
    trial_id: int
    run_id: int
    job_id: str
    state: str
    reason: str
    submitted: float
    ended: float | None
    exit_code: int | None
    preempt_acked: bool
    outcome: str
    event_offset: int
    event_seq: int
    searcher_seq: int
    first_op: int
    ops_decided: int


@dataclass(frozen=True)
class ArrayRecord(_Record):
    id: int | None
    experiment_id: int
    index: int
    job_id: str
    offset: int
    count: int
    throttle: int
    submitted: float


class LiveRun(NamedTuple):
    """A live run as the daemon's loop reads every one on every tick, with what its trial
    says it should do: plain values from one query, not an ORM object per row."""

    trial_id: int
    run_id: int
    job_id: str
    state: str
    event_offset: int
    event_seq: int
    searcher_seq: int
    first_op: int
    ops_decided: int
    experiment_id: int
    stop_requested: bool
    ops_json: str


R = TypeVar("R", bound=_Record)


_NAMES: dict[type[_Record], tuple[str, ...]] = {}


def _names(record: type[_Record]) -> tuple[str, ...]:
    names = _NAMES.get(record)
    if names is None:
        names = _NAMES[record] = tuple(f.name for f in fields(record))
    return names


def _columns(record: type[_Record], table: str, **instead: str) -> str:
    """The SELECT list of a record's columns; ``instead`` gives some an expression instead."""
    return ", ".join(f"{instead[name]} AS {name}" if name in instead else f'{table}."{name}"'
                     for name in _names(record))


class Reads:
    """A read-only connection to the database of one state directory (not shared between
    threads: open one where it is used)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if not path.exists():
            raise StoreError(f"no database at {path}; start the daemon with `hpcdet daemon start`")
        # A URI of the absolute path: a '?' or '#' in a directory name stays part of the path.
        self._conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True,
                                     timeout=30)
        hold_to_oldest_limit(self._conn)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Reads:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    @contextmanager
    def snapshot(self) -> Iterator[Reads]:
        """Reads that see one state of the database: one read transaction, so that a commit
        of the daemon's lands wholly before or after them."""
        if self._conn.in_transaction:
            yield self
            return
        self._rows("BEGIN")
        try:
            yield self
        finally:
            self._conn.commit()

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise StoreError(
                f"database error in {self.path}: {e.__class__.__name__}: {e}. The run tree "
                "still holds everything: restart the daemon (`hpcdet daemon stop`, then "
                "`hpcdet daemon start`); it sets a damaged database aside and rebuilds it."
            ) from e

    def _records(self, record: type[R], sql: str, params: Sequence[Any] = ()) -> list[R]:
        rows = self._rows(sql, params)
        flags = [_names(record).index(name) for name in record._booleans]
        if not flags:
            return [record(*row) for row in rows]
        found = []
        for row in rows:
            values = list(row)
            for i in flags:
                values[i] = bool(values[i])
            found.append(record(*values))
        return found

    def experiments(self, config: bool = True, archived: bool = True,
                    labels: Collection[str] = (), offset: int = 0, limit: int | None = None
                    ) -> list[ExperimentRecord]:
        """The experiments, by id: without ``archived``, those not archived; with ``labels``,
        those with every one; ``limit`` of them from the ``offset``-th. Without ``config``,
        their config_json is left unread (a listing of thousands need not decode kilobytes
        each) and reads as "{}"."""
        columns = _columns(ExperimentRecord, "experiment",
                           **({} if config else {"config_json": "'{}'"}))
        where = [] if archived else ["NOT experiment.archived"]
        where += ["EXISTS (SELECT 1 FROM json_each(experiment.labels_json) AS label "
                  "WHERE label.value = ?)"] * len(labels)
        return self._records(
            ExperimentRecord,
            f"SELECT {columns} FROM experiment {'WHERE ' if where else ''}{' AND '.join(where)}"
            " ORDER BY experiment.id LIMIT ? OFFSET ?",
            (*labels, -1 if limit is None else limit, offset))

    def experiment(self, exp_id: int) -> ExperimentRecord:
        found = self._records(ExperimentRecord, f"SELECT {_columns(ExperimentRecord, 'experiment')}"
                              " FROM experiment WHERE experiment.id = ?", (exp_id,))
        if not found:
            raise NotFoundError(f"experiment {exp_id} not found; `hpcdet experiment list`")
        return found[0]

    def trial_work(self, first: int | None = None, last: int | None = None
                   ) -> dict[int, tuple[int, float]]:
        """Per experiment (those with ids from ``first`` to ``last``, or all): its trials, and
        their work done (1 for a completed trial, else its progress), summed in SQL."""
        where = ""
        params: list[Any] = [TrialState.COMPLETED.value]
        if first is not None and last is not None:
            where = "WHERE experiment_id BETWEEN ? AND ?"
            params += [first, last]
        rows = self._rows(
            "SELECT experiment_id, count(*), sum(CASE WHEN state = ? THEN 1.0 ELSE progress END)"
            f" FROM trial {where} GROUP BY experiment_id", params)
        return {int(e): (int(n), float(done or 0.0)) for e, n, done in rows}

    def trials(self, exp_id: int | None = None) -> list[TrialRecord]:
        """The experiment's trials (or every trial), by id."""
        where, params = ("WHERE trial.experiment_id = ?", (exp_id,)) if exp_id is not None \
            else ("", ())
        return self._records(TrialRecord, f"SELECT {_columns(TrialRecord, 'trial')} FROM trial "
                             f"{where} ORDER BY trial.id", params)

    def experiment_runs(self, exp_id: int) -> list[RunRecord]:
        """The runs of the experiment's trials, by trial then run."""
        return self._records(
            RunRecord, f"SELECT {_columns(RunRecord, 'run')} FROM run JOIN trial ON "
            "trial.id = run.trial_id WHERE trial.experiment_id = ? ORDER BY run.trial_id, "
            "run.run_id", (exp_id,))

    def arrays(self, exp_id: int) -> list[ArrayRecord]:
        """The experiment's submitted job arrays (those with a job id), in submission order."""
        return self._records(
            ArrayRecord, f"SELECT {_columns(ArrayRecord, 'arrayjob')} FROM arrayjob WHERE "
            "arrayjob.experiment_id = ? AND arrayjob.job_id != '' ORDER BY arrayjob.\"index\"",
            (exp_id,))


@contextmanager
def reading(source: Reads | Store) -> Iterator[Reads]:
    """``source`` as Reads in one snapshot: itself, or a connection of its own to a Store's
    database for the duration (the web UI and the SDK hold a Store, and the UI serves requests
    on several threads)."""
    if isinstance(source, Reads):
        with source.snapshot():
            yield source
        return
    with Reads(source.path) as reads, reads.snapshot():
        yield reads
