"""The daemon's database: its schema checked (one of another version or damaged is set aside
and rebuilt from the run tree), and the daemon's writes (``hpcdet.store.database`` says who
may write; ``hpcdet.store.queries`` holds the reads).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from sqlmodel import Session, SQLModel, col, select

from hpcdet.private import open_private
from hpcdet.rundir.events import EventBatch, read_event_batch
from hpcdet.states import (
    SUBMITTED_RUN_STATES,
    RunState,
)
from hpcdet.store import entries, ingest, journal_apply, trial_events
from hpcdet.store.database import make_engine
from hpcdet.store.ingest import BestOf
from hpcdet.store.journal_apply import UnappliableEntry
from hpcdet.store.limits import parts
from hpcdet.store.models import (
    ArrayJob,
    Checkpoint,
    Experiment,
    Metric,
    RegistryJournal,
    Run,
    SearcherEvent,
    Trial,
)
from hpcdet.store.queries import Queries

# One line of a journal: (its start offset, the offset past it, its entry or None if damaged).
JournalLine = tuple[int, int, "dict[str, Any] | None"]

# Raised whenever a table changes. The database is an index of the run tree: one of another
# version is set aside and the daemon rebuilds it from the journals and event logs.
SCHEMA_VERSION = 11

log = logging.getLogger(__name__)

def _problem(path: Path) -> tuple[str, str] | None:
    """Why the database at ``path`` cannot be used as it is: (suffix to set it aside with,
    what is wrong), or None when it is fine."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True)
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version != SCHEMA_VERSION:
                return "old", f"has schema version {version}, not {SCHEMA_VERSION}"
            checked = [row[0] for row in conn.execute("PRAGMA quick_check")]
            if checked != ["ok"]:
                return "corrupt", f"fails SQLite's integrity check: {'; '.join(checked[:3])}"
            for table in SQLModel.metadata.sorted_tables:
                have = {row[1] for row in conn.execute(f'PRAGMA table_info("{table.name}")')}
                missing = sorted(c.name for c in table.columns if c.name not in have)
                if missing:
                    return "corrupt", f"lacks {table.name}.{', '.join(missing)} of its schema"
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        return "corrupt", f"is not a valid SQLite database ({e})"
    return None


def _set_aside(path: Path, suffix: str) -> Path:
    aside = path.with_name(f"{path.name}.{suffix}")
    for ext in ("", "-wal", "-shm"):
        old = path.with_name(path.name + ext)
        if old.exists():
            old.replace(aside.with_name(aside.name + ext))
    return aside


def _raw(s: Session) -> sqlite3.Connection:
    """The session's sqlite3 connection, in the session's transaction: a statement sent
    straight to it skips tens of microseconds of SQLAlchemy, which the ingest of many small
    batches a second notices."""
    raw = s.connection().connection.dbapi_connection
    assert isinstance(raw, sqlite3.Connection)
    return raw


def _apply_lines(
    s: Session, lines: Iterable[JournalLine], offset: int, skip: set[int],
    report: Callable[[int, str], None],
) -> tuple[int, int]:
    """Apply a journal's ``lines`` read from ``offset`` (``Store.apply_journal`` says how);
    returns how many applied and the offset past the last line."""
    applied = 0
    pos = offset
    previous = -1  # the part of the entry applied just before; -1 if none was
    for start, end, entry in lines:
        pos = end  # past skipped lines too: each is reported once
        after, previous = previous, -1
        if entry is None or start in skip:
            continue
        kind = entry.get("kind")
        cls = entries.KINDS.get(kind) if isinstance(kind, str) else None
        if cls is None:
            report(start, f"an entry of unknown kind {kind!r}")
            continue
        part = entry.get("part", 0)
        if part != 0 and part != after + 1:
            report(start, "an entry whose append lost an entry before it")
            continue
        try:
            journal_apply.apply(s, *journal_apply.read_line(cls, entry))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise UnappliableEntry(start, e) from e
        applied += 1
        previous = part
        s.flush()
    return applied, pos


class Store(Queries):
    """The database of one state directory opened by its daemon: the queries (``Queries``)
    and the daemon's writes, which nothing else makes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._experiment_of: dict[int, int] = {}
        self._metric_ends: ingest.Ends = {}  # as committed; see ingest.MetricWrites
        problem = _problem(path) if path.exists() else None
        if problem is not None:
            # The database is an index of the run tree: the daemon rebuilds it from there.
            kind, why = problem
            suffix = "old" if kind == "old" else time.strftime("corrupt-%Y%m%dT%H%M%S")
            aside = _set_aside(path, suffix)
            log.warning("the database %s %s; moved it to %s and rebuilding it from the run "
                        "tree", path, why, aside)
        self.engine = make_engine(path, readonly=False)
        SQLModel.metadata.create_all(self.engine)
        with self.engine.connect() as conn:
            conn.exec_driver_sql(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.commit()

    # Writes, by the daemon only.

    def copy_to(self, dest: Path) -> None:
        """A consistent copy of the database at ``dest``, replaced whole, in rollback-journal
        mode: its readers are on other hosts, where WAL's shared memory is not shared."""
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}")
        tmp.unlink(missing_ok=True)
        os.close(open_private(tmp))
        source = sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=ro", uri=True,
                                 timeout=30)
        try:
            copy = sqlite3.connect(tmp)
            try:
                source.backup(copy)
                copy.execute("PRAGMA journal_mode=DELETE")
            finally:
                copy.close()
        finally:
            source.close()
        os.replace(tmp, dest)

    def apply_journal(
        self, exp_id: int, read: Callable[[int], Iterable[JournalLine]], skip: set[int],
        report: Callable[[int, str], None],
    ) -> int:
        """Apply the entries of an experiment's journal the database has not seen; returns how
        many. ``read(offset)`` yields the journal's lines from ``offset``; lines starting at an
        offset in ``skip`` and damaged ones are passed over (``report`` hears of an entry of
        unknown kind). The entries and the offset past them commit together.

        Raises ``UnappliableEntry`` for an entry whose fields its kind cannot use; nothing of
        this call is then applied.

        Entries appended together (``Journal.record_all``) carry their place in the append,
        ``part``, from 0. One applies only right after the one before it: what a crash left of
        an append (a page that never reached the disk, read as a damaged line) applies up to
        the first entry missing, as the same entries appended one by one would.
        """
        with self.session() as s:
            exp = s.get(Experiment, exp_id)
            offset = exp.journal_offset if exp is not None else 0
            applied, pos = _apply_lines(s, read(offset), offset, skip, report)
            exp = s.get(Experiment, exp_id)
            if exp is not None and pos != offset:
                exp.journal_offset = pos
                s.add(exp)
        return applied

    def apply_registry_journal(
        self, read: Callable[[int], Iterable[JournalLine]], skip: set[int],
        report: Callable[[int, str], None],
    ) -> int:
        """``apply_journal`` for the model registry's journal, whose offset has a row of its
        own."""
        with self.session() as s:
            mark = s.get(RegistryJournal, 1) or RegistryJournal()
            offset = mark.journal_offset
            applied, pos = _apply_lines(s, read(offset), offset, skip, report)
            if pos != offset:
                mark.journal_offset = pos
                s.add(mark)
        return applied

    def ingest_events(self, trial_id: int, run_id: int, events_path: str | Path, best: BestOf
                      ) -> EventBatch:
        """Store the run's events past what was stored before, exactly once; returns them (what
        the feed reads of them: ``EventBatch``)."""
        return self.ingest_runs([(trial_id, run_id, events_path, best)])[(trial_id, run_id)]

    def ingest_runs(self, logs: Sequence[tuple[int, int, str | Path, BestOf]]
                    ) -> dict[tuple[int, int], EventBatch]:
        """``ingest_events`` for many runs, each given as (trial, run, its event log, what
        makes its trial's best), in one transaction: the daemon's loop ingests every grown log
        of a tick at once. Returns each run's new events.

        The usual batch, metric reports alone, costs a few plain statements; an event that
        changes the trial (a checkpoint, progress, a status) loads the trial's row.
        """
        found: dict[tuple[int, int], EventBatch] = {}
        if not logs:
            return found
        with ingest.collector_paused(), self.session() as s:
            conn = _raw(s)
            writes = ingest.MetricWrites(conn, self._metric_ends)
            offsets = {(t, r): (id_, offset) for part in parts(t for t, _, _, _ in logs)
                       for id_, t, r, offset in conn.execute(
                           "SELECT id, trial_id, run_id, event_offset FROM run "
                           f"WHERE trial_id IN ({','.join('?' * len(part))})", part)}
            marks: list[tuple[int, int | None, bool, int]] = []
            for trial_id, run_id, path, best in logs:
                row, offset = offsets[(trial_id, run_id)]
                batch = read_event_batch(path, offset)
                # What the feed reads, without the reports' text: a sweep's batches hold every
                # report of several seconds of a thousand runs.
                found[(trial_id, run_id)] = batch.for_feed()
                if batch.end_offset == offset:
                    continue
                # Past corrupt lines too (read_event_batch logged them), so each is reported
                # once.
                acked = any(ev.type == "preempt_ack" for ev in batch.others)
                marks.append((batch.end_offset, batch.last_seq, acked, row))
                if batch.last_seq is not None:
                    self._apply(s, writes, trial_id, run_id, batch, best)
                if len(writes.rows) >= ingest.HELD_ROWS:
                    writes.flush()
            writes.flush()
            if marks:
                conn.executemany(
                    "UPDATE run SET event_offset = ?, event_seq = coalesce(?, event_seq), "
                    "preempt_acked = preempt_acked OR ? WHERE id = ?", marks)
        # Committed: what the transaction knew of the metric table's ends is true now.
        if len(self._metric_ends) + len(writes.ends) > ingest.MAX_KNOWN_ENDS:
            self._metric_ends.clear()
        self._metric_ends.update(writes.ends)
        return found

    @staticmethod
    def _apply(s: Session, writes: ingest.MetricWrites, trial_id: int, run_id: int,
               batch: EventBatch, best: BestOf) -> None:
        """One run's batch of events onto its trial's rows. The trial is loaded only for the
        events that change it; its best validation, which validations change, is read and
        written on its own (the ORM never sets it here)."""
        changes = [ev for ev in batch.others if ev.type in trial_events.APPLIERS]
        if changes:
            trial = s.get(Trial, trial_id)
            assert trial is not None
            for ev in changes:  # in order; the batch's metric_lines are metrics only
                trial_events.APPLIERS[ev.type](s, trial, run_id, ev)
            s.add(trial)
        if "validation" not in batch.metric_lines.groups and not any(
                ev.type == "metrics" for ev in batch.others):
            ingest.store_metrics(writes, trial_id, run_id, batch, best, None)
            return
        [before] = writes.conn.execute(
            "SELECT best_validation FROM trial WHERE id = ?", (trial_id,)).fetchone()
        value = ingest.store_metrics(writes, trial_id, run_id, batch, best, before)
        if value != before:
            writes.conn.execute("UPDATE trial SET best_validation = ? WHERE id = ?",
                                (value, trial_id))

    def set_run_states(self, states: dict[str, tuple[RunState, str]]) -> None:
        """What the scheduler says of submitted runs (pending, running, and why), by job id,
        in one statement: a poll answers for every live job. A run that ended meanwhile keeps
        its end."""
        if not states:
            return
        submitted = sorted(SUBMITTED_RUN_STATES)
        with self.session() as s:
            conn = _raw(s)
            rows = conn.execute(
                "SELECT id, job_id, state, reason FROM run "
                f"WHERE state IN ({','.join('?' * len(submitted))})", submitted).fetchall()
            conn.executemany("UPDATE run SET state = ?, reason = ? WHERE id = ?", [
                (*said, id_) for id_, job_id, *now in rows
                if (said := states.get(job_id)) is not None and tuple(now) != said])

    def discard_experiment(self, exp_id: int) -> None:
        """Forget an experiment whose creation failed midway: its rows go."""
        with self.session() as s:
            trial_ids = list(s.exec(select(Trial.id).where(Trial.experiment_id == exp_id)))
            for child in (Run, Metric, Checkpoint):
                for part in parts(trial_ids):
                    for row in s.exec(select(child).where(col(child.trial_id).in_(part))):
                        s.delete(row)
            for model in (SearcherEvent, ArrayJob, Trial):
                for row in s.exec(select(model).where(model.experiment_id == exp_id)):
                    s.delete(row)
            exp = s.get(Experiment, exp_id)
            if exp is not None:
                s.delete(exp)
        self._metric_ends.clear()  # the ids of its trials may be given again
