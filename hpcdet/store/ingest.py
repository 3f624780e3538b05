"""Trial events applied to the database: metrics, checkpoints, progress, acknowledgements.

``Store.ingest_runs`` commits the rows of each run's batch of events together with the byte
offset just past it, so a daemon killed at any instant neither loses nor doubles a row.
"""

from __future__ import annotations

import gc
import json
import math
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from itertools import chain, compress, count, repeat
from operator import itemgetter
from typing import Any, Callable

from hpcdet.rundir.events import Event, EventBatch, MetricLines
from hpcdet.rundir.metric_codec import (
    ChunkColumns,
    Chunks,
    decode_steps,
    encode_steps,
    join_columns,
    metric_values,
    report_texts,
)
from hpcdet.store.limits import SQL_VARIABLES


@dataclass(frozen=True)
class BestOf:
    """Which validation metric makes a trial's best, and which way."""

    metric: str
    smaller_is_better: bool = True

    def better(self, value: float, best: float | None) -> bool:
        return best is None or (value < best if self.smaller_is_better else value > best)


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


# What an event that is not a metric report changes: the trial's row (the run's own
# bookkeeping, its offset, last event and preemption acknowledgement, is the store's).

# A trial that alerts in a loop must not grow its row without bound: the newest are kept.


@dataclass
class _Report:
    """One (group, step) row of a trial's metrics as a batch leaves it."""

    id: int | None  # its row, if it has one already
    run_id: int
    seq: int
    metrics_json: str
    batch_metrics_json: str
    reported: float


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector paused while a batch is ingested. A batch of a hundred thousand
    reports makes as many events, none in a cycle, which the feed drops once it has read them;
    meanwhile the collections they trigger, each full one visiting every object of the
    process, took a quarter of the ingest's time."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# A report as read: (end offset, seq, group, steps completed, metrics JSON, batch metrics JSON
# or "", time).
_Line = tuple[int, int, str, int, str, str, float]


# A trial's last ordinal and highest step of a group; each a lookup in its own index (SQLite
# answers a lone min() or max() from an index, not two in one SELECT).
_ENDS_SQL = """SELECT
    (SELECT ordinal + reports - 1 FROM metric WHERE trial_id = ?1 AND "group" = ?2
     ORDER BY ordinal DESC LIMIT 1),
    (SELECT max(last_step) FROM metric WHERE trial_id = ?1 AND "group" = ?2)"""

# (trial, group) -> (its last ordinal, its highest step), -1 for each when it has no rows
Ends = dict[tuple[int, str], tuple[int, int]]
# A new row: (trial, run, seq, group, steps completed, last step, ordinal, reports, metrics
# JSON, steps JSON, times JSON, batch metrics JSON, time reported)
Row = tuple[int, int, int, str, int, int, int, int, str, str, str, str, float]

# Ends remembered at most; past it they are forgotten and asked of the database again.
MAX_KNOWN_ENDS = 50_000
# New rows held before they are inserted, within a transaction: the daemon's memory, not its
# speed, sets it (at 10,000, inserting in chunks costs nothing measurable).
HELD_ROWS = 10_000


class MetricWrites:
    """The metric rows of one ingest transaction: new rows are inserted together at the end,
    however many runs they came from, and each trial's group's ends come from ``known`` (what
    earlier transactions committed) before the database. At a thousand live runs of one report
    a tick each, the two statements a run cost more than reading its log.

    ``known`` holds only what was committed: the store adds ``ends`` to it after its commit
    (the daemon is the database's only writer, so what it committed stays true until it
    changes it)."""

    def __init__(self, conn: sqlite3.Connection, known: Ends) -> None:
        self.conn = conn
        self.known = known
        self.ends: Ends = {}  # as this transaction leaves them
        self.rows: list[Row] = []

    def end_of(self, trial_id: int, group: str) -> tuple[int, int]:
        key = (trial_id, group)
        found = self.ends.get(key) or self.known.get(key)
        if found is None:
            last, top = self.conn.execute(_ENDS_SQL, key).fetchone()
            found = self.ends[key] = (-1 if last is None else int(last),
                                      -1 if top is None else int(top))
        return found

    def flush(self) -> None:
        """Insert the new rows (before a statement that reads them, and before the commit)."""
        _insert(self.conn, self.rows)
        self.rows = []


def store_metrics(writes: MetricWrites, trial_id: int, run_id: int, batch: EventBatch,
                  best: BestOf, best_value: float | None) -> float | None:
    """A batch's metric reports in a few statements rather than a few per report: reports of
    one (group, step) in one run merge, as Determined merges them (the trial refused
    conflicts); a later run's report of a step replaces the earlier run's after a resume.

    A report of a new step, the usual case, is stored as the trial wrote its metrics; only
    reports that merge or replace are decoded. Returns the trial's best validation value
    after the batch (``best_value`` before it)."""
    lines = batch.metric_lines
    decoded = [ev for ev in batch.others if ev.type == "metrics"] if batch.others else []
    if not lines.seqs and not decoded:
        return best_value
    if decoded or "validation" in lines.groups:
        best_value = _track_best(best_value, lines, decoded, best)
    if not decoded:
        by_group = None  # each group's steps, parsed only if they may not rise
        spans = _rising_spans(lines)
        if spans is None:
            by_group = _steps_by_group(lines)
            spans = {g: (min(steps), max(steps)) for g, steps in by_group.items()}
        ends = {group: writes.end_of(trial_id, group) for group in spans}
        if all(ends[g][1] < low and (
                by_group is None or len(set(by_group[g])) == len(by_group[g]))
               for g, (low, _) in spans.items()):
            # Every report is of a step new to the trial: straight in, in file order.
            last = _append(writes.rows, trial_id, run_id, lines, ends, by_group)
            for group, (_, high) in spans.items():
                writes.ends[(trial_id, group)] = (last[group], high)
            return best_value
    reports = _reports(lines)
    for ev in decoded:
        body, batches = ev.body, ev.body.get("batch_metrics")
        reports.append((ev.end_offset, ev.seq, body["group"], int(body["steps_completed"]),
                        json.dumps(dict(body["metrics"])),
                        "" if batches is None else json.dumps(batches), body["time"]))
    wanted = {(group, step) for _, _, group, step, _, _, _ in reports}
    groups = sorted({g for g, _ in wanted})
    ends = {group: writes.end_of(trial_id, group) for group in groups}
    writes.flush()  # what follows reads the table
    low, high = min(x for _, x in wanted), max(x for _, x in wanted)
    stored: dict[tuple[str, int], _Report] = {}
    for group in groups:
        if ends[group][1] < low:
            continue
        _split_chunks(writes.conn, trial_id, group, low, high)
        found = writes.conn.execute(
            'SELECT id, steps_completed, run_id, seq, metrics_json, batch_metrics_json, '
            'reported FROM metric WHERE trial_id = ? AND "group" = ? '
            "AND last_step BETWEEN ? AND ?", (trial_id, group, low, high))
        for id_, step, row_run, seq, metrics_json, batch_json, reported in found:
            if (group, step) in wanted:
                stored[(group, step)] = _Report(id_, row_run, seq, metrics_json, batch_json,
                                                reported)
    reports.sort(key=itemgetter(0))
    _merge(writes, trial_id, run_id, reports, stored, ends)
    return best_value


def _append(rows: list[Row], trial_id: int, run_id: int, lines: MetricLines,
            ends: dict[str, tuple[int, int]], steps: dict[str, list[int]] | None
            ) -> dict[str, int]:
    """Add the lines' rows, numbered on from each group's last ordinal in ``ends``; returns
    each group's last ordinal after them. ``steps``: each group's steps in the lines, in
    order (``_steps_by_group``), or None if they rise (``_rising_spans``). Consecutive chunk
    lines of a group and the same metrics make one row of up to ROW_REPORTS reports: at a
    thousand live runs the daemon reads each log every ~25 seconds, and the lines of a run in
    one row rather than one each cost it a fraction of the inserts."""
    chunks = lines.chunks
    following = {g: last + 1 for g, (last, _) in ends.items()}
    if not chunks.lines or (steps is None and not _joining(lines)):
        _append_each(rows, trial_id, run_id, lines, following)
        return {g: n - 1 for g, n in following.items()}
    columns = cache(chunks.columns)  # parsed only if lines join
    at = dict(zip(chunks.lines, count()))
    span: list[int] = []  # the chunk lines (k) of the row being made, all of span_group's
    span_group, reports = "", 0
    for i, group in enumerate([*lines.groups, None]):  # None: past the last line
        k = at.get(i)
        if span and (k is None or group != span_group or reports + chunks.reports[k] > ROW_REPORTS
                     or not _same_names(columns(), span[0], k)):
            ordinal = following[span_group]
            at_step = ordinal - ends[span_group][0] - 1  # its first report's index in steps
            rows.append(_chunk_row(trial_id, run_id, lines, span[0], span[-1] + 1, ordinal,
                                   reports, None if steps is None else
                                   steps[span_group][at_step:at_step + reports], columns))
            following[span_group] += reports
            span, reports = [], 0
        if group is None:
            break
        if k is None:
            step = lines.steps[i]
            rows.append((trial_id, run_id, lines.seqs[i], group, step, step, following[group],
                         1, lines.metrics_json[i], "", "", "", lines.times[i]))
            following[group] += 1
        else:
            span.append(k)
            span_group = group
            reports += chunks.reports[k]
    return {g: n - 1 for g, n in following.items()}


def _joining(lines: MetricLines) -> bool:
    """Whether a chunk line follows one of its group's, which it may join in a row."""
    at, groups = lines.chunks.lines, lines.groups
    return any(j == i + 1 and groups[i] == groups[j] for i, j in zip(at, at[1:]))


def _append_each(rows: list[Row], trial_id: int, run_id: int, lines: MetricLines,
                 following: dict[str, int]) -> None:
    """Add a row per line, made in bulk (reports, or chunk lines whose steps rise), numbered
    from each group's ordinal in ``following``, which it moves on past them."""
    chunks = lines.chunks
    reports, steps_json = [1] * len(lines.groups), [""] * len(lines.groups)
    texts = lines.metrics_json.copy()
    for k, i in enumerate(chunks.lines):
        reports[i] = chunks.reports[k]
        texts[i], steps_json[i] = _line_texts(chunks, k)
    ordinals = []
    for group, n in zip(lines.groups, reports):
        ordinals.append(following[group])
        following[group] += n
    rows.extend(zip(
        repeat(trial_id), repeat(run_id), lines.seqs, lines.groups, lines.steps, lines.lasts,
        ordinals, reports, texts, steps_json, repeat(""), repeat(""), lines.times))


# Reports a row holds at most: a curve's point is read from its row's text, which SQLite
# parses up to the point's report.
ROW_REPORTS = 250


def _same_names(columns: ChunkColumns, j: int, k: int) -> bool:
    starts = columns.starts
    return columns.names[starts[j]:starts[j + 1]] == columns.names[starts[k]:starts[k + 1]]


def _chunk_row(trial_id: int, run_id: int, lines: MetricLines, first: int, end: int,
               ordinal: int, reports: int, steps: list[int] | None,
               columns: Callable[[], ChunkColumns]) -> Row:
    """The row of chunk lines ``first`` to ``end`` (consecutive, of one group and the same
    metrics), which hold ``reports`` reports: one line's text as it stands, or their values
    joined column by column (``join_columns``), and each line's time kept while they differ.
    ``steps``: their steps, as read, or None if they rise."""
    chunks = lines.chunks
    index = chunks.lines[first]
    low, high = ((lines.steps[index], lines.lasts[chunks.lines[end - 1]]) if steps is None
                 else (min(steps), max(steps)))
    head = (trial_id, run_id, lines.seqs[index], lines.groups[index], low, high, ordinal,
            reports)
    reported = lines.times[index]
    if end == first + 1:
        return (*head, *_line_texts(chunks, first), "", "", reported)
    text = join_columns(columns(), first, end)
    times = [lines.times[i] for i in chunks.lines[first:end]]
    times_json = "" if times.count(reported) == len(times) else (
        "[" + ",".join(f"[{n},{t!r}]" for n, t in zip(chunks.reports[first:end], times)) + "]")
    return (*head, text, encode_steps(chunks.steps[first:end]), times_json, "", reported)


def _line_texts(chunks: Chunks, k: int) -> tuple[str, str]:
    """The metrics text and steps JSON of a row of chunk line ``k`` alone: its text as it
    stands, or a report's if it holds one report."""
    if chunks.reports[k] == 1:
        return report_texts(chunks.texts[k], 1)[0], ""
    return chunks.texts[k], encode_steps(chunks.steps[k:k + 1])


def _reports(lines: MetricLines) -> list[_Line]:
    """The lines' reports one by one, a chunk's each with its own metrics text."""
    reports: list[_Line] = list(zip(
        lines.end_offsets, lines.seqs, lines.groups, lines.steps, lines.metrics_json,
        repeat(""), lines.times))
    chunks = lines.chunks
    for k in reversed(range(len(chunks.lines))):
        i = chunks.lines[k]
        end, seq, group, _, metrics_json, _, reported = reports[i]
        steps = chunks.steps_of(k)
        reports[i:i + 1] = [
            (end, seq, group, step, text, "", reported)
            for step, text in zip(steps, report_texts(metrics_json, len(steps)))]
    return reports


def _split_chunks(conn: sqlite3.Connection, trial_id: int, group: str, low: int, high: int
                  ) -> None:
    """Store the reports of the group's chunks with a step in [low, high] one row each (with
    their ordinals), for reports of those steps to merge into or replace."""
    found = conn.execute(
        'SELECT id, run_id, seq, ordinal, reports, steps_json, metrics_json, times_json, '
        'reported FROM metric WHERE trial_id = ? AND "group" = ? AND last_step >= ? '
        "AND steps_completed <= ? AND reports > 1", (trial_id, group, low, high)).fetchall()
    if not found:
        return
    conn.executemany("DELETE FROM metric WHERE id = ?", [(row[0],) for row in found])
    _insert(conn, [
        (trial_id, run_id, seq, group, step, step, ordinal + k, 1, text, "", "", "", reported)
        for _, run_id, seq, ordinal, reports, steps_json, metrics_json, times_json, row_time
        in found
        for k, (step, text, reported) in enumerate(chunk_reports(
            reports, steps_json, metrics_json, times_json, row_time))])


def chunk_reports(reports: int, steps_json: str, metrics_json: str, times_json: str,
                  reported: float) -> Iterator[tuple[int, str, float]]:
    """(step, metrics text, time) of each report of a chunk row, in order."""
    times = ([reported] * reports if not times_json else
             [float(t) for n, t in json.loads(times_json) for _ in range(n)])
    return zip(decode_steps(steps_json), report_texts(metrics_json, reports), times)


def _merge(writes: MetricWrites, trial_id: int, run_id: int, reports: list[_Line],
           rows: dict[tuple[str, int], _Report], ends: dict[str, tuple[int, int]]) -> None:
    """Reports of which some merge into or replace one another or stored rows, in order."""
    changed: set[tuple[str, int]] = set()
    ordinals: dict[tuple[str, int], int] = {}
    next_ordinal = {group: last + 1 for group, (last, _) in ends.items()}
    for _, seq, group, step, metrics_json, batches_json, reported in reports:
        key = (group, step)
        row = rows.get(key)
        if row is not None and row.run_id == run_id:
            row.metrics_json = json.dumps({**json.loads(row.metrics_json),
                                           **json.loads(metrics_json)})
            row.batch_metrics_json = row.batch_metrics_json or batches_json
        elif row is not None:
            row.metrics_json, row.batch_metrics_json = metrics_json, batches_json
            row.run_id, row.seq, row.reported = run_id, seq, reported
        else:
            rows[key] = _Report(None, run_id, seq, metrics_json, batches_json, reported)
            ordinals[key] = next_ordinal[group]
            next_ordinal[group] += 1
        changed.add(key)
    writes.rows.extend(
        (trial_id, run_id, r.seq, k[0], k[1], k[1], ordinals[k], 1, r.metrics_json, "", "",
         r.batch_metrics_json, r.reported) for k, r in rows.items()
        if k in changed and r.id is None)
    for group, (_, top) in ends.items():
        steps = [step for g, step in changed if g == group]
        writes.ends[(trial_id, group)] = (next_ordinal[group] - 1, max([top, *steps]))
    old = [(r.run_id, r.seq, r.metrics_json, r.batch_metrics_json, r.reported, r.id)
           for k, r in rows.items() if k in changed and r.id is not None]
    if old:
        writes.conn.executemany(
            "UPDATE metric SET run_id = ?, seq = ?, metrics_json = ?, batch_metrics_json = ?, "
            "reported = ? WHERE id = ?", old)


def _rising_spans(lines: MetricLines) -> dict[str, tuple[int, int]] | None:
    """Each group's lowest and highest step if its steps rise through the lines, found from
    each line's first and last step without parsing the rest: a signed chunk line's rise
    (``Chunks.rising``). None if they may not."""
    if not lines.chunks.rising:
        return None
    spans: dict[str, tuple[int, int]] = {}
    groups = set(lines.groups)
    for group in groups:
        firsts, lasts = lines.steps, lines.lasts
        if len(groups) > 1:
            mask = list(map(group.__eq__, lines.groups))
            firsts, lasts = list(compress(firsts, mask)), list(compress(lasts, mask))
        if not all(map(int.__lt__, lasts, firsts[1:])):  # each line starts past the last
            return None
        spans[group] = (firsts[0], lasts[-1])
    return spans


def _steps_by_group(lines: MetricLines) -> dict[str, list[int]]:
    """Each group's steps in the lines, in order, a chunk's each."""
    chunks = lines.chunks
    if chunks.lines:
        if len(chunks.lines) == len(lines.groups) and len(set(lines.groups)) == 1:
            return {lines.groups[0]: list(map(int, ",".join(chunks.steps).split(",")))}
        at = dict(zip(chunks.lines, count()))
        found: dict[str, list[int]] = {}
        for i, (group, step) in enumerate(zip(lines.groups, lines.steps)):
            k = at.get(i)
            found.setdefault(group, []).extend((step,) if k is None else chunks.steps_of(k))
        return found
    if len(groups := set(lines.groups)) == 1:
        return {lines.groups[0]: lines.steps}
    return {g: list(compress(lines.steps, map(g.__eq__, lines.groups))) for g in groups}


def _track_best(value: float | None, lines: MetricLines, decoded: list[Event], best: BestOf
                ) -> float | None:
    # Only the validations' metric is looked for, in their text where the pattern read them;
    # what the feed asks of them (rarely) is decoded from the line if it asks.
    validations = list(compress(lines.metrics_json, map("validation".__eq__, lines.groups)))
    candidates = metric_values(validations, best.metric)
    for ev in decoded:
        if ev.body["group"] == "validation":
            candidate = _as_float(ev.body["metrics"].get(best.metric))
            if candidate is not None:
                candidates.append(candidate)
    if candidates:
        found = min(candidates) if best.smaller_is_better else max(candidates)
        if best.better(found, value):
            value = found
    return value


# Rows per INSERT statement: one statement of many rows costs SQLite less than as many of one.
_ROW_WIDTH = 13  # bound values per row
_ROWS_PER_INSERT = SQL_VARIABLES // _ROW_WIDTH


def _insert(conn: sqlite3.Connection, rows: list[Row]) -> None:
    values = list(chain.from_iterable(rows))
    chunk = _ROW_WIDTH * _ROWS_PER_INSERT
    whole = len(values) - len(values) % chunk
    if whole:
        conn.executemany(_insert_sql(_ROWS_PER_INSERT),
                         [values[i:i + chunk] for i in range(0, whole, chunk)])
    if whole < len(values):
        conn.execute(_insert_sql((len(values) - whole) // _ROW_WIDTH), values[whole:])


@cache
def _insert_sql(rows: int) -> str:
    marks = ", ".join([f"({', '.join('?' * _ROW_WIDTH)})"] * rows)
    return ('INSERT INTO metric (trial_id, run_id, seq, "group", steps_completed, last_step, '
            "ordinal, reports, metrics_json, steps_json, times_json, batch_metrics_json, "
            f"reported) VALUES {marks}")
