"""The CLI's read path: the rows that listings and `describe` show, read with the standard
library's sqlite3 and returned as the records of ``hpcdet.records``, as ``Queries`` returns them.

Starting SQLAlchemy and SQLModel costs a CLI command more than its query, and the ORM builds
an object per row; a listing of thousands of experiments needs neither. Read-only like
``Queries``: the database is opened with ``mode=ro``, never written, and in WAL
mode each query sees the last commit of the daemon, the only writer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from hpcdet.errors import NotFoundError, StoreError
from hpcdet.records import ArrayRecord, ExperimentRecord, RunRecord, TrialRecord
from hpcdet.states import TrialState
from hpcdet.store import decode
from hpcdet.store.limits import hold_to_oldest_limit

if TYPE_CHECKING:
    from hpcdet.store.queries import Queries


# Each table's columns, in the models' order (a test keeps them equal): the CLI's path does
# not import the models, which would start SQLModel.
EXPERIMENT_COLUMNS = (
    "id", "name", "state", "config_json", "description", "labels_json", "archived",
    "resource_pool", "priority", "weight", "position", "backend", "searcher", "created", "ended",
    "journal_offset", "progress", "actions_done", "searcher_done", "error", "request_id", "task",
    "advice")
TRIAL_COLUMNS = (
    "id", "experiment_id", "request_id", "ops_json", "ops_completed", "closed",
    "stop_requested", "early_exit", "exit_reported", "state", "hparams_json", "trial_seed",
    "restarts", "run_id", "latest_checkpoint", "steps_completed", "progress", "status",
    "metadata_json", "alerts_json", "best_validation", "end_reason", "started", "ended")
RUN_COLUMNS = (
    "id", "trial_id", "run_id", "job_id", "state", "reason", "submitted", "ended", "exit_code",
    "preempt_acked", "outcome", "event_offset", "event_seq", "searcher_seq", "first_op",
    "ops_decided", "started", "used_seconds", "used_gpus", "used_cpus", "usage_by")
ARRAY_COLUMNS = (
    "id", "experiment_id", "index", "job_id", "offset", "count", "throttle", "submitted")


def _columns(names: Sequence[str], table: str, **instead: str) -> str:
    """The SELECT list of a table's columns; ``instead`` gives some an expression instead."""
    return ", ".join(f"{instead[name]} AS {name}" if name in instead else f'{table}."{name}"'
                     for name in names)


R = TypeVar("R")


class Reads:
    """A read-only connection to the database of one state directory (not shared between
    threads: open one where it is used)."""

    def __init__(self, path: Path, immutable: bool = False) -> None:
        """``immutable``: the daemon's copy (``Store.copy_to``), read without locks."""
        self.path = path
        if not path.exists():
            raise StoreError(f"no database at {path}; start the daemon with `hpcdet daemon start`")
        # A URI of the absolute path: a '?' or '#' in a directory name stays part of the path.
        self._conn = sqlite3.connect(
            f"{path.absolute().as_uri()}?mode=ro{'&immutable=1' * immutable}", uri=True,
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

    def _records(self, decode: Callable[[dict[str, Any]], R], names: tuple[str, ...], sql: str,
                 params: Sequence[Any] = ()) -> list[R]:
        """The rows ``sql`` selects (the columns ``names``, in order) as records."""
        return [decode(dict(zip(names, row))) for row in self._rows(sql, params)]

    def experiments(self, config: bool = True, archived: bool = True,
                    labels: Collection[str] = (), offset: int = 0, limit: int | None = None,
                    tasks: bool = False) -> list[ExperimentRecord]:
        """The experiments, by id: without ``archived``, those not archived; with ``labels``,
        those with every one; ``limit`` of them from the ``offset``-th; with ``tasks``, the
        interactive tasks (commands, notebooks, shells) instead. Without ``config``, their
        config_json is left unread (a listing of thousands need not decode kilobytes each)
        and reads as "{}"."""
        columns = _columns(EXPERIMENT_COLUMNS, "experiment",
                           **({} if config else {"config_json": "'{}'"}))
        where = ["experiment.task != ''" if tasks else "experiment.task = ''"]
        where += [] if archived else ["NOT experiment.archived"]
        where += ["EXISTS (SELECT 1 FROM json_each(experiment.labels_json) AS label "
                  "WHERE label.value = ?)"] * len(labels)
        return self._records(
            decode.experiment, EXPERIMENT_COLUMNS,
            f"SELECT {columns} FROM experiment WHERE {' AND '.join(where)}"
            " ORDER BY experiment.id LIMIT ? OFFSET ?",
            (*labels, -1 if limit is None else limit, offset))

    def experiment(self, exp_id: int) -> ExperimentRecord:
        found = self._records(decode.experiment, EXPERIMENT_COLUMNS,
                              f"SELECT {_columns(EXPERIMENT_COLUMNS, 'experiment')}"
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
        return self._records(decode.trial, TRIAL_COLUMNS,
                             f"SELECT {_columns(TRIAL_COLUMNS, 'trial')} FROM trial "
                             f"{where} ORDER BY trial.id", params)

    def experiment_runs(self, exp_id: int) -> list[RunRecord]:
        """The runs of the experiment's trials, by trial then run."""
        return self._records(
            decode.run, RUN_COLUMNS,
            f"SELECT {_columns(RUN_COLUMNS, 'run')} FROM run JOIN trial ON "
            "trial.id = run.trial_id WHERE trial.experiment_id = ? ORDER BY run.trial_id, "
            "run.run_id", (exp_id,))

    def runs_between(self, first: int, last: int) -> dict[int, tuple[int, list[RunRecord]]]:
        """Per experiment with an id from ``first`` to ``last`` (a listing's page): its
        trials' resources.slots_per_trial and its runs, in one query (hpcdet.views.usage)."""
        names = ("experiment_id", "slots", *RUN_COLUMNS)
        rows = self._rows(
            "SELECT trial.experiment_id, json_extract(experiment.config_json, "
            f"'$.resources.slots_per_trial'), {_columns(RUN_COLUMNS, 'run')} FROM run "
            "JOIN trial ON trial.id = run.trial_id JOIN experiment ON experiment.id = "
            "trial.experiment_id WHERE trial.experiment_id BETWEEN ? AND ? "
            "ORDER BY run.trial_id, run.run_id", (first, last))
        found: dict[int, tuple[int, list[RunRecord]]] = {}
        for row in rows:
            values = dict(zip(names, row))
            slots = values["slots"] if isinstance(values["slots"], int) else 1
            found.setdefault(values["experiment_id"], (slots, []))[1].append(decode.run(values))
        return found

    def arrays(self, exp_id: int) -> list[ArrayRecord]:
        """The experiment's submitted job arrays (those with a job id), in submission order."""
        return self._records(
            decode.array, ARRAY_COLUMNS,
            f"SELECT {_columns(ARRAY_COLUMNS, 'arrayjob')} FROM arrayjob WHERE "
            "arrayjob.experiment_id = ? AND arrayjob.job_id != '' ORDER BY arrayjob.\"index\"",
            (exp_id,))


@contextmanager
def reading(source: Reads | Queries) -> Iterator[Reads]:
    """``source`` as Reads in one snapshot: itself, or a connection of its own to the database
    of ``Queries`` for the duration (the web UI and the SDK hold one, and the UI serves requests
    on several threads)."""
    if isinstance(source, Reads):
        with source.snapshot():
            yield source
        return
    with Reads(source.path) as reads, reads.snapshot():
        yield reads
