"""Reading a run's event log (``events.jsonl``), trial -> daemon.

Every line is a JSON object with ``seq`` (1, 2, 3, ... within the file) and ``type``; the
lines of metric reports are as ``hpcdet.rundir.metric_codec`` writes them. Only whole lines
are read (``hpcdet.rundir.atomic``). The daemon stores the byte offset just past the last
line it read in the same database transaction as the rows it made of them (exactly-once
ingest), and reads on from there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from itertools import accumulate, compress, repeat
from operator import attrgetter
from pathlib import Path
from typing import Any, NamedTuple, cast

from hpcdet.rundir.atomic import parse_line, report_skipped
from hpcdet.rundir.metric_codec import (
    FED_GROUP,
    NO_CHUNKS,
    STRIDE,
    Chunks,
    check_signed,
    chunk_lines,
    decoded_reports,
    is_int64,
    is_report,
    lines_pattern,
)


class Event(NamedTuple):
    seq: int
    type: str
    body: Mapping[str, Any]
    end_offset: int



class _MetricsBody(Mapping[str, Any]):
    """The body of a metrics line the pattern read. Its group is known; the rest is decoded
    from the line if asked for (the daemon's feed asks every event for its group, and only
    a validation for its metrics, only for a searcher that wants them)."""

    __slots__ = ("group", "_line", "_body")

    def __init__(self, group: str, line: str) -> None:
        self.group = group
        self._line = line
        self._body: dict[str, Any] | None = None

    def __getitem__(self, key: str) -> Any:
        if key == "group":
            return self.group
        return self._decoded()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._decoded())

    def __len__(self) -> int:
        return len(self._decoded())

    def __repr__(self) -> str:
        return repr(self._decoded())

    def _decoded(self) -> dict[str, Any]:
        if self._body is None:
            body = json.loads(self._line)
            del body["seq"], body["type"]
            self._body = body
        return self._body


class MetricLines(NamedTuple):
    """A batch's metrics events read by the pattern, as columns in file order: what storing
    them needs, none of it decoded."""

    seqs: list[int]
    times: list[float]
    groups: list[str]
    steps: list[int]  # a chunk line's first
    lasts: list[int]  # each line's last step (a report's one)
    metrics_json: list[str]  # each line's metrics as the trial wrote them (a chunk's columns)
    end_offsets: list[int]
    texts: list[str]  # each whole line
    # The chunk lines, whose reports are also in steps, lasts and metrics_json.
    chunks: Chunks = NO_CHUNKS


_NO_LINES = MetricLines([], [], [], [], [], [], [], [])

class FedLines(NamedTuple):
    """A batch's reports of ``FED_GROUP`` that the pattern read: their seqs, lines and the
    offsets just past them, in file order."""

    seqs: list[int]
    texts: list[str]
    end_offsets: list[int]


_NO_FED = FedLines([], [], [])


# Tuples, not dataclasses: the daemon reads a batch of every live run on every tick.
class EventBatch(NamedTuple):
    """A run's events after an offset, as the daemon stores and feeds them.

    ``events`` are those the feed reads, in file order: every event but the metric reports of
    groups other than ``FED_GROUP`` the pattern read, which are in ``metric_lines`` only (an
    Event each for a hundred thousand training reports cost the ingest a tenth of its time).
    Those of ``FED_GROUP`` are made only when asked for: a searcher that does not read
    validations needs only ``others``. ``read_events`` gives them all."""

    fed: FedLines
    end_offset: int  # just past the last whole line read, corrupt or not
    first_seq: int | None = None  # of the first event read, whichever kind; None if none
    last_seq: int | None = None
    metric_lines: MetricLines = _NO_LINES
    others: list[Event] = []  # the events not in metric_lines; read, never changed

    @property
    def events(self) -> list[Event]:
        seqs, texts, ends = self.fed
        fed = list(map(Event, seqs, repeat("metrics"),
                       map(_MetricsBody, repeat(FED_GROUP), texts), ends))
        return sorted(fed + self.others, key=attrgetter("end_offset")) if self.others else fed

    def for_feed(self) -> EventBatch:
        """The batch without the text of its reports, which only the store reads."""
        return self._replace(metric_lines=_NO_LINES)


# The most a batch reads, but for the one line that crosses it: what reading a log costs the
# daemon's memory (~10x the bytes read), whatever the log has grown to while it was stopped.
BATCH_BYTES = 2 << 20

_READ_CHUNK = 1 << 20


def read_event_batch(path: str | Path, offset: int, limit: int | None = None) -> EventBatch:
    """Events of the whole lines in the ``limit`` bytes (``BATCH_BYTES``) after byte
    ``offset``, at least one line however long, each with the offset just past its line; a
    reader goes on from ``end_offset``.

    Corrupt lines are skipped (and logged); ``end_offset`` goes past them too, so a reader that
    stores it reports each one once.
    """
    try:
        with open(path, "rb", buffering=0) as f:  # reads of known sizes: no buffer wanted
            f.seek(offset)
            limit = limit or BATCH_BYTES
            # No more than the file holds: a read of ``limit`` allocates it all first, and
            # the daemon reads a thousand logs a sweep that have grown by a line or two.
            data = f.read(min(limit, max(os.fstat(f.fileno()).st_size - offset, 0)))
            if len(data) == limit and b"\n" not in data:  # one line longer than the limit
                pieces = [data]
                while (piece := f.read(_READ_CHUNK)) and b"\n" not in piece:
                    pieces.append(piece)
                data = b"".join([*pieces, piece])
    except FileNotFoundError:
        return EventBatch(_NO_FED, offset)
    size = data.rfind(b"\n") + 1
    if size == 0:
        return EventBatch(_NO_FED, offset)
    # A batch can be a hundred thousand lines, and a Python loop over them costs more than
    # storing them: all lines are matched by one regular expression, and the columns of their
    # fields are slices of its split. Latin-1 gives one character per byte, so a position in
    # the text is one in the file. The split gives, for each line, the text before it (its
    # newline), the line, then its fields, all None if it is not of the pattern.
    parts: list[str | None] = lines_pattern().split(data[:size - 1].decode("latin-1"))
    lines = cast("list[str]", parts[1::STRIDE])
    # The end of each line: the sum of the lengths before it, each with its newline.
    ends = list(accumulate(map((1).__add__, map(len, lines)), initial=offset))[1:]
    # seq, time, group, (first) step, metrics' or columns' text, and the rest of a chunk's steps
    columns = [parts[i::STRIDE] for i in (2, 4, 5, 7, 9, 8)]
    crcs = parts[3::STRIDE]
    if crcs.count(None) != len(crcs):
        check_signed(lines, columns, crcs)
    chunks = NO_CHUNKS
    if columns[5].count(None) != len(columns[5]):
        chunks = chunk_lines(columns, crcs)
    matched = columns[0]
    odd = [i for i, seq in enumerate(matched) if seq is None] if None in matched else []
    fast_lines, fast_ends = lines, ends
    if odd:
        columns = [list(compress(column, matched)) for column in columns[:5]]
        fast_lines, fast_ends = list(compress(lines, matched)), list(compress(ends, matched))
        if chunks.lines:  # their indices among the lines kept
            before = list(accumulate(map(bool, matched)))
            chunks = chunks._replace(lines=[before[i] - 1 for i in chunks.lines])
    seq_texts, time_texts, groups, step_texts, metrics_json = cast(
        "list[list[str]]", columns[:5])
    seqs = list(map(int, seq_texts))
    fed = list(map(FED_GROUP.__eq__, groups))
    others: list[Event] = []
    for i in odd:
        start = ends[i] - len(lines[i]) - 1
        raw = data[start - offset:ends[i] - offset - 1]
        if not raw.strip():
            continue
        body = parse_line(path, start, raw)
        if body is None:
            continue
        seq, type_ = body.pop("seq", None), body.pop("type", None)
        if not is_int64(seq) or not isinstance(type_, str):
            report_skipped(path, start, "an event without seq or type")
            continue
        if type_ == "metrics":
            reports = decoded_reports(body) if "columns" in body else [body]
            if reports is None:
                report_skipped(path, start, "a chunk of metrics whose steps and values differ")
            elif not all(map(is_report, reports)):
                report_skipped(path, start, "a metrics report without its group, step, metrics "
                               "or time")
                reports = None
            others += (Event(seq, type_, report, ends[i]) for report in reports or ())
            continue
        others.append(Event(seq=seq, type=type_, body=body, end_offset=ends[i]))
    # The first and last events in file order, of either kind.
    bounds = [(fast_ends[0], seqs[0]), (fast_ends[-1], seqs[-1])] if seqs else []
    if others:
        bounds += [(others[0].end_offset, others[0].seq), (others[-1].end_offset, others[-1].seq)]
    steps = lasts = list(map(int, step_texts))
    if chunks.lines:
        lasts = steps.copy()
        for i, text in zip(chunks.lines, chunks.steps):
            lasts[i] = int(text.rpartition(",")[2])
    # The lines of one flush share its time: each text is parsed once.
    times = {text: float(text) for text in dict.fromkeys(time_texts)}
    metric_lines = MetricLines(seqs, list(map(times.__getitem__, time_texts)), groups, steps,
                               lasts, metrics_json, fast_ends, fast_lines, chunks)
    fed_lines = FedLines(list(compress(seqs, fed)), list(compress(fast_lines, fed)),
                         list(compress(fast_ends, fed))) if any(fed) else _NO_FED
    return EventBatch(fed_lines, offset + size, min(bounds)[1] if bounds else None,
                      max(bounds)[1] if bounds else None, metric_lines, others)


def event_batches(path: str | Path, offset: int) -> Iterator[EventBatch]:
    """The log's batches after byte ``offset``, one after another to its last whole line."""
    while (batch := read_event_batch(path, offset)).end_offset != offset:
        yield batch
        offset = batch.end_offset


def iter_events(path: str | Path, offset: int) -> Iterator[Event]:
    """Every event after byte ``offset``, in file order, a chunk's reports one by one, read a
    batch at a time; each carries the offset just past its line."""
    for batch in event_batches(path, offset):
        lines = batch.metric_lines
        bodies: list[Mapping[str, Any]] = list(map(_MetricsBody, lines.groups, lines.texts))
        reports = list(map(Event, lines.seqs, repeat("metrics"), bodies, lines.end_offsets))
        for i in reversed(lines.chunks.lines):
            whole = dict(bodies[i])
            reports[i:i + 1] = [Event(lines.seqs[i], "metrics", body, lines.end_offsets[i])
                                for body in decoded_reports(whole) or ()]
        yield from sorted([*reports, *batch.others], key=attrgetter("end_offset"))


def read_events(path: str | Path, offset: int) -> list[Event]:
    """``iter_events`` as a list."""
    return list(iter_events(path, offset))

