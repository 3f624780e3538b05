"""The exchange between trials and the daemon over the shared filesystem.

Trial -> daemon: an append-only JSON-lines event log per run. Every line carries ``seq``
(1, 2, 3, ... within the file). Only whole lines (ending in a newline) are read, so a writer
that died mid-line leaves nothing half-ingested, and the next writer cuts that torn tail off
before appending. A whole line that is not an event (a damaged file) is skipped and logged
with its byte offset. The daemon stores the byte offset of the last whole line in the same
database transaction as the rows it produced (exactly-once ingest).

Daemon -> trial: small JSON files replaced atomically (write temp, fsync, rename), so a reader
sees the old or the new content, never a mix. Trials poll them with one ``stat`` per check.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from functools import cache, lru_cache
from itertools import accumulate, chain, compress, repeat
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, cast

from hpcdet.private import current_umask

log = logging.getLogger(__name__)

# Determined encodes non-finite floats as strings; keep that so the values survive JSON.
_NONFINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def _json_default(obj: Any) -> Any:
    for attr in ("item", "tolist"):  # numpy scalars and arrays
        fn = getattr(obj, attr, None)
        if callable(fn):
            return fn()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return "NaN" if math.isnan(obj) else _NONFINITE[obj]
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def dumps(obj: Any) -> str:
    """JSON with Determined's encoding of NaN/Infinity and numpy values."""
    try:
        return json.dumps(obj, default=_json_default, allow_nan=False, separators=(",", ":"))
    except ValueError:
        return json.dumps(_finite(obj), default=_json_default, separators=(",", ":"))


def write_atomic(path: Path, obj: Any, durable: bool = True, mode: int | None = None) -> None:
    """Replace ``path`` with the JSON of ``obj`` so readers never see a partial file."""
    write_text_atomic(path, json.dumps(obj, indent=1, default=_json_default), durable, mode)


def write_text_atomic(path: Path, text: str, durable: bool = True,
                      mode: int | None = None) -> None:
    """Replace ``path`` with ``text`` so readers (on any node) never see a partial file.
    Without ``durable`` the text is not forced to disk first: for a file its writer rewrites
    often and writes again on start, whose loss in a machine's crash costs nothing. ``mode``,
    when given, is the file's whatever the umask (0600: the daemon's own files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        # mkstemp makes 0600 whatever the umask; the umask decides, as for any other file
        # (0600 by default, 0640 when the cluster config shares with a group).
        os.fchmod(fd, 0o666 & ~current_umask() if mode is None else mode)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return default


def append_line(path: Path, obj: Any) -> int:
    """Append one JSON line durably (journals written by the daemon); returns where it starts."""
    return append_whole_lines(path, [dumps(obj)])


def append_lines(path: Path, objs: Sequence[Any]) -> int:
    """Append JSON lines durably, with one write and one fsync; returns where the first starts."""
    return append_whole_lines(path, [dumps(obj) for obj in objs])


def append_whole_lines(path: Path, lines: list[str]) -> int:
    """Append ``lines`` durably, each ending in a newline; all or none of them stay. Returns
    the byte offset where the first of them starts: cutting the file there undoes the append.

    A writer killed mid-line leaves a torn tail that readers skip; it is cut off first, since
    the next line would otherwise be glued to it into one unreadable line. A write that fails
    (a full disk) is cut off again, so a retry writes no line twice.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(line + "\n" for line in lines).encode()
    with open(path, "a+b") as f:
        start = _cut_torn_tail(f)
        try:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        except BaseException:
            _truncate(path, start)
            raise
    return start


_TAIL_CHUNK = 64 * 1024


def _cut_torn_tail(f: BinaryIO) -> int:
    """Truncate an open file after its last newline; returns the new size."""
    end = f.seek(0, os.SEEK_END)
    pos = end
    while pos > 0:
        step = min(_TAIL_CHUNK, pos)
        f.seek(pos - step)
        newline = f.read(step).rfind(b"\n")
        if newline >= 0:
            pos = pos - step + newline + 1
            break
        pos -= step
    if pos != end:
        f.truncate(pos)
    return pos


def whole_lines(
    path: Path, offset: int = 0
) -> Iterator[tuple[int, int, dict[str, Any] | None]]:
    """(start, end, parsed object or None when corrupt) of each whole line after ``offset``.

    A corrupt whole line (not a JSON object: two events glued by a torn write, bytes from a
    damaged disk) is logged with its file and byte offset and given as None, so a reader goes
    on past it instead of failing on it for ever.
    """
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        f.seek(offset)
        pos, rest = offset, b""
        while chunk := f.read(_READ_CHUNK):  # in chunks: a reader may stop at the first line
            *lines, rest = (rest + chunk).split(b"\n")
            for raw in lines:
                start, pos = pos, pos + len(raw) + 1
                if raw.strip():
                    yield start, pos, _parse(path, start, raw)


_READ_CHUNK = 1 << 20


def _parse(path: str | Path, start: int, raw: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(raw)
    except ValueError:  # also undecodable bytes
        obj = None
    if not isinstance(obj, dict):
        report_skipped(path, start, "a corrupt line")
        return None
    return obj


# What this process has reported: a daemon re-reads whole logs at start (rebuild, refeed),
# and each corrupt line is worth one warning, not one per reading.
_reported: set[str] = set()


def report_skipped(path: str | Path, offset: int, what: str) -> None:
    """Warn once per process that ``what`` (a line) at ``offset`` in ``path`` was skipped."""
    message = f"skipped {what} in {path} at byte offset {offset}"
    if message not in _reported:
        _reported.add(message)
        log.warning("%s", message)


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Every whole JSON line of a journal; a torn last line and corrupt lines are skipped."""
    for _, _, obj in whole_lines(path):
        if obj is not None:
            yield obj


class Event(NamedTuple):
    seq: int
    type: str
    body: Mapping[str, Any]
    end_offset: int


# A metrics line as EventWriter writes a Core API report: its keys in this order, a float
# time, flat metrics (numbers, plain strings, true/false/null) and batch metrics null or
# absent. Such a line is valid JSON by the pattern alone, so its fields are taken from it as
# they stand and its metrics text can be stored as written. Any other line is decoded whole.
# A chunk line holds consecutive reports of one group and the same metrics that one flush
# wrote, a list of values per metric (``"steps"``, ``"columns"``); its strings hold none of
# ``,[]{}``, so that its columns and their values are found by the text between them.
#
# A signed chunk line (``"crc"`` after its type) is one the writer made of plain values only
# and rising steps (``_signed``): its columns are not checked value by value, which is most of
# what reading a log costs, nor counted, nor its steps parsed to find that they rise, and a row
# of that one line keeps its text; but its CRC-32 of the text after the ``"crc"`` member must
# match, or it is decoded whole like any other line. The CRC guards against what a shared
# filesystem does to a file (a block of zeros, a line from two writers), not against a trial
# that forges one: a trial can spoil only its own rows and experiment, and the daemon survives
# it as it does a damaged log (a forged line's columns of the wrong length are stored as they
# are, and read back cut or filled with null: ``hpcdet.store.ingest.chunk_metrics``).
_TEXT = r"[ !#-\[\]-~]*+"  # printable ASCII but " and \, so a JSON string's value is its text
_COLUMN_TEXT = r"[ !#-+\--Z^-z|~]*+"  # the same without , [ ] { }
_INT = r"(?:0|[1-9][0-9]*+)"
# A seq or a step: up to 18 digits fit SQLite's integer; a line with more is decoded whole, and
# kept if its numbers fit (``_is_int64``).
_SHORT_INT = r"(?:0|[1-9][0-9]{0,17}+)"
_NUMBER = rf"-?+{_INT}(?:\.[0-9]++)?+(?:[eE][-+]?+[0-9]++)?+"
_FLOAT = rf"-?+{_INT}(?:\.[0-9]++(?:[eE][-+]?+[0-9]++)?+|[eE][-+]?+[0-9]++)"


def _value(text: str) -> str:
    return rf'(?>{_NUMBER}|"{text}"|true|false|null)'


_MEMBER = rf'"{_TEXT}":{_value(_TEXT)}'
_COLUMN = rf'"{_COLUMN_TEXT}":\[{_value(_COLUMN_TEXT)}(?:,{_value(_COLUMN_TEXT)})*+\]'
# A report and a chunk share the groups of their (first) step and of their metrics' text, so
# that the split gives each field of either in one column.
_METRICS_LINE = (
    rf'\{{"seq":({_SHORT_INT}),"type":"metrics",(?:"crc":(?P<crc>[0-9]{{1,10}}+),)?+'
    rf'"time":({_FLOAT}),"group":"({_TEXT})","steps(?:_completed":|(?P<chunk>":\[))({_SHORT_INT})'
    rf'(?(chunk)((?:,{_SHORT_INT})*+)\],"columns":|,"metrics":)'
    rf'((?(chunk)(?(crc)\{{[^\n]*(?=\}}$)|\{{(?:{_COLUMN}(?:,{_COLUMN})*+)?+\}})'
    rf'|\{{(?:{_MEMBER}(?:,{_MEMBER})*+)?+\}}))'
    r'(?(chunk)|(?:,"batch_metrics":null)?+)'
    r"\}"
)


@cache
def _lines_pattern() -> re.Pattern[str]:
    """Matches each line: the line, then its eight fields if it is such a metrics line (seq,
    CRC, time, group, the chunk's mark, the (first) step, the rest of a chunk's steps from
    their first comma, the metrics' text or the chunk's columns'). Compiled at the first read
    (~1.5 ms): the trial side and most CLI commands import this module to write, never to read."""
    return re.compile(rf"^({_METRICS_LINE}|[^\n]*+)$", re.MULTILINE)


_STRIDE = 10  # what its split gives of each line: the text before it, the line, eight fields
# A column of a chunk's text the pattern let in: its metric's name and its values' text.
COLUMNS = re.compile(r'"([^"]*)":\[([^\]]*)\]')


@lru_cache(maxsize=64)
def _member(name: str) -> re.Pattern[str]:
    return re.compile(rf'[{{,]"{re.escape(name)}":({_NUMBER})[,}}]')


def metric_values(metrics_json: list[str], name: str) -> list[float]:
    """The finite numbers metric ``name`` has in reports' metrics as the pattern read them
    (``MetricLines.metrics_json``): found in their text, not decoded. The pattern lets no
    quote into a key or value, so ``"name":`` after a brace or comma is that key; and each
    text is an object, so their joined text is searched at once."""
    return [value for value in map(float, _member(name).findall("".join(metrics_json)))
            if math.isfinite(value)]


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


class ChunkColumns(NamedTuple):
    """Chunk lines' columns as flat lists: the name of each metric and the text of its values
    ('0.5,0.25,0.125'), a line's from ``starts[k]`` to ``starts[k + 1]``. Flat, so that a
    run's lines of the same metrics are checked and joined a column at a time, not a line at
    a time."""

    starts: list[int]
    names: list[str]
    values: list[str]


def chunk_columns(texts: list[str]) -> ChunkColumns:
    """The columns of chunk lines' texts the pattern let in (or that their writer signed),
    whose names and values hold none of ``"[]``: each column is one ``":[`` and one match."""
    pairs = COLUMNS.findall("".join(texts))
    return ChunkColumns(list(accumulate(map(str.count, texts, repeat('":[')), initial=0)),
                        list(map(itemgetter(0), pairs)), list(map(itemgetter(1), pairs)))


class Chunks(NamedTuple):
    """A batch's chunk lines, one entry per line in file order: its index among the batch's
    metric lines, its steps' text ("1,2,3") and their number, and its columns' text
    ('{"loss":[0.5,0.25],"lr":[0.1,0.1]}'), which a row of one line keeps as it stands."""

    lines: list[int]
    steps: list[str]
    reports: list[int]
    texts: list[str]
    rising: bool = False  # every line's steps rise (each was signed)
    checked: ChunkColumns | None = None  # their columns, if reading them parsed them

    def columns(self) -> ChunkColumns:
        return self.checked or chunk_columns(self.texts)

    def steps_of(self, k: int) -> list[int]:
        return list(map(int, self.steps[k].split(",")))


_NO_CHUNKS = Chunks([], [], [], [])


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
    chunks: Chunks = _NO_CHUNKS


_NO_LINES = MetricLines([], [], [], [], [], [], [], [])

# The one group of reports the daemon's feed reads (the searcher's validations); the others
# are stored and never looked at one by one.
FED_GROUP = "validation"


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
    parts: list[str | None] = _lines_pattern().split(data[:size - 1].decode("latin-1"))
    lines = cast("list[str]", parts[1::_STRIDE])
    # The end of each line: the sum of the lengths before it, each with its newline.
    ends = list(accumulate(map((1).__add__, map(len, lines)), initial=offset))[1:]
    # seq, time, group, (first) step, metrics' or columns' text, and the rest of a chunk's steps
    columns = [parts[i::_STRIDE] for i in (2, 4, 5, 7, 9, 8)]
    crcs = parts[3::_STRIDE]
    if crcs.count(None) != len(crcs):
        _check_signed(lines, columns, crcs)
    chunks = _NO_CHUNKS
    if columns[5].count(None) != len(columns[5]):
        chunks = _chunks(columns, crcs)
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
        body = _parse(path, start, raw)
        if body is None:
            continue
        seq, type_ = body.pop("seq", None), body.pop("type", None)
        if not _is_int64(seq) or not isinstance(type_, str):
            report_skipped(path, start, "an event without seq or type")
            continue
        if type_ == "metrics":
            reports = _chunk_reports(body) if "columns" in body else [body]
            if reports is None:
                report_skipped(path, start, "a chunk of metrics whose steps and values differ")
            elif not all(map(_is_report, reports)):
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


_SIGNED_HEAD = len('{"seq":,"type":"metrics","crc":,')


def _check_signed(lines: list[str], columns: list[list[str | None]], crcs: list[str | None]
                  ) -> None:
    """Signed lines whose CRC does not match their text lose their fields, to be decoded
    whole like any line the pattern did not match."""
    for i in compress(range(len(crcs)), crcs):
        seq, crc = cast(str, columns[0][i]), cast(str, crcs[i])
        signed = lines[i][_SIGNED_HEAD + len(seq) + len(crc):]
        if zlib.crc32(signed.encode("latin-1")) != int(crc):
            for column in (*columns, crcs):
                column[i] = None


def _chunks(columns: list[list[str | None]], crcs: list[str | None]) -> Chunks:
    """The chunk lines the pattern matched (``crcs``: each line's, if signed). Those of the
    group the feed reads (which it reads one report at a time), and unsigned ones whose
    columns do not each hold a value per step, are left to the decoder, as if the pattern had
    not matched them. A signed line's columns are as its writer made them: its CRC matched."""
    seqs, groups, firsts, texts, rests = columns[0], columns[2], columns[3], columns[4], columns[5]
    lines = [i for i, rest in enumerate(rests) if rest is not None]
    decoded = [i for i in lines if groups[i] == FED_GROUP]
    unsigned = [i for i in lines if crcs[i] is None]
    checked = None
    if unsigned:
        checked, wrong = _check_counts(
            [cast(str, texts[i]) for i in unsigned], [cast(str, rests[i]) for i in unsigned])
        decoded += map(unsigned.__getitem__, wrong)
        if wrong or len(unsigned) < len(lines):
            checked = None
    if decoded:
        for i in decoded:
            seqs[i] = rests[i] = None
        return _chunks(columns, crcs)
    rest_texts = cast("list[str]", list(map(rests.__getitem__, lines)))
    steps = list(map(str.__add__, cast("list[str]", map(firsts.__getitem__, lines)), rest_texts))
    return Chunks(lines, steps, list(map((1).__add__, map(str.count, rest_texts, repeat(",")))),
                  cast("list[str]", list(map(texts.__getitem__, lines))), not unsigned, checked)


def _check_counts(texts: list[str], rests: list[str]) -> tuple[ChunkColumns, list[int]]:
    """Chunk lines' columns, and which of the lines (their indices in ``texts``) have a column
    that does not hold a value per step (``rests``: their steps after the first)."""
    found = chunk_columns(texts)
    commas = list(map(str.count, rests, repeat(",")))
    per_value = chain.from_iterable(map(repeat, commas, map(int.__sub__, found.starts[1:],
                                                             found.starts[:-1])))
    if list(map(str.count, found.values, repeat(","))) == list(per_value):
        return found, []
    return found, [k for k, (text, n) in enumerate(zip(texts, commas))
                   if any(values.count(",") != n for _, values in COLUMNS.findall(text))]


def _is_int64(value: Any) -> bool:
    """Whether ``value`` is an int SQLite can store, as a seq or a step must be."""
    return type(value) is int and -(2**63) <= value < 2**63


def _is_report(body: Mapping[str, Any]) -> bool:
    """Whether a decoded metrics report holds what storing it needs."""
    return (isinstance(body.get("group"), str) and _is_int64(body.get("steps_completed"))
            and isinstance(body.get("metrics"), dict) and type(body.get("time")) in (int, float))


def _chunk_reports(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The reports of a decoded chunk line, each with the body of a single report's line, or
    None if its columns do not each hold a value per step."""
    steps, columns = body.get("steps"), body.get("columns")
    if (not isinstance(steps, list) or not isinstance(columns, dict)
            or not all(type(step) is int for step in steps)
            or not all(isinstance(values, list) and len(values) == len(steps)
                       for values in columns.values())):
        return None
    common = {k: v for k, v in body.items() if k not in ("steps", "columns", "crc")}
    return [{**common, "steps_completed": step,
             "metrics": {name: values[k] for name, values in columns.items()},
             "batch_metrics": None}
            for k, step in enumerate(steps)]


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
                                for body in _chunk_reports(whole) or ()]
        yield from sorted([*reports, *batch.others], key=attrgetter("end_offset"))


def read_events(path: str | Path, offset: int) -> list[Event]:
    """``iter_events`` as a list."""
    return list(iter_events(path, offset))


# Events the daemon reads only at its sweeps of every live run (training metrics, progress:
# all but what it decides on) wait in a trial's writer up to this long. The daemon's sweeps
# come every second with a few live runs and every ~25 s with a thousand; each flush is a line
# per metric group the daemon reads and stores, and lines, not reports, are most of what its
# reading costs. A trial killed outright loses at most this much of them: steps after its last
# checkpoint, which its restart reports again.
HOLD_SECONDS = 5.0
# ... and no more than this many, whatever their age.
MAX_HELD = 10_000


class EventWriter:
    """Buffered, thread-safe appender of a run's event log.

    ``emit`` only appends to a list (microseconds); a background thread writes the buffer
    every ``interval`` seconds if it holds an event the daemon decides on (``decisive``, which
    also rings ``bell``), and otherwise once its oldest event is ``hold`` seconds old
    (``due``); ``flush`` writes it at once (checkpoints, exit).
    """

    def __init__(self, path: Path, interval: float = 1.0, bell: Path | None = None,
                 hold: float = HOLD_SECONDS) -> None:
        self.path = path
        self.interval = interval
        self.hold = hold
        self.bell = bell  # rung after a write of what the daemon decides on
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self._since = 0.0  # when the oldest pending event was emitted (monotonic)
        self._decisive = False  # whether a pending event is
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._seq = _last_seq(path)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="hpcdet-events", daemon=True)
            self._thread.start()

    def emit(self, type_: str, body: dict[str, Any]) -> None:
        with self._lock:
            if not self._pending:
                self._since = time.monotonic()
            self._pending.append((type_, body))
            self._decisive = self._decisive or decisive(type_, body)

    def due(self, now: float) -> bool:
        """Whether the background thread writes the buffer at monotonic time ``now``."""
        return bool(self._pending) and (self._decisive or now - self._since >= self.hold
                                        or len(self._pending) >= MAX_HELD)

    def flush(self) -> None:
        with self._io_lock:
            with self._lock:
                pending, self._pending = self._pending, []
                decided, self._decisive = self._decisive, False
            if not pending:
                return
            lines = _lines(pending, self._seq + 1, time.time())
            seq = self._seq + len(lines)
            try:
                append_whole_lines(self.path, lines)
            except BaseException:
                # Keep the batch for the next flush; none of it stayed in the file.
                with self._lock:
                    self._pending[:0] = pending
                    self._decisive = self._decisive or decided
                raise
            self._seq = seq
            if self.bell is not None and decided:
                ring(self.bell)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if self.due(time.monotonic()):
                    self.flush()
            except BaseException as e:  # surfaced on the next report, as Determined does
                self.error = e


_REPORT_KEYS = frozenset({"group", "steps_completed", "metrics", "batch_metrics"})


def _chunkable(type_: str, body: Mapping[str, Any]) -> bool:
    """Whether an event is a report a chunk line can hold: a Core API report without batch
    metrics, of a group but the one the feed reads."""
    return (type_ == "metrics" and body.keys() <= _REPORT_KEYS
            and isinstance(body.get("group"), str) and body["group"] != FED_GROUP
            and "steps_completed" in body and "metrics" in body
            and body.get("batch_metrics") is None)


def _lines(pending: list[tuple[str, dict[str, Any]]], seq: int, now: float) -> list[str]:
    """The lines of a flush, numbered from ``seq``. Consecutive reports of the same metrics
    in one group but the one the feed reads make one chunk line, each metric's name once: a
    trial reporting every batch writes, and the daemon reads and stores, a line a second
    rather than hundreds."""
    lines = []
    i = 0
    while i < len(pending):
        type_, body = pending[i]
        j = i + 1
        if _chunkable(type_, body):
            names = list(body["metrics"])
            while (j < len(pending) and _chunkable(*pending[j])
                   and pending[j][1]["group"] == body["group"]
                   and list(pending[j][1]["metrics"]) == names):
                j += 1
        if j - i > 1:
            run = [report["metrics"] for _, report in pending[i:j]]
            steps = [report["steps_completed"] for _, report in pending[i:j]]
            columns = {name: [metrics[name] for metrics in run] for name in names}
            chunk = {"time": now, "group": body["group"], "steps": steps, "columns": columns}
            lines.append(_signed(seq, chunk) if _plain(steps, columns) else
                         dumps({"seq": seq, "type": "metrics", **chunk}))
        else:
            lines.append(dumps({"seq": seq, "type": type_, "time": now, **body}))
        seq += 1
        i = j
    return lines


_PLAIN_NAME = re.compile(_COLUMN_TEXT)
_PLAIN_TYPES = frozenset({int, float, bool, type(None)})


def _plain(steps: list[Any], columns: dict[str, list[Any]]) -> bool:
    """Whether a chunk may be signed: steps that are ints rising from zero or more, names
    without ``"\\,[]{}``, and values that are numbers, booleans or None (``dumps`` writes
    non-finite floats as plain strings)."""
    return (all(type(step) is int for step in steps) and steps[0] >= 0
            and all(map(int.__lt__, steps, steps[1:]))
            and all(map(_PLAIN_NAME.fullmatch, columns))
            and set(map(type, chain.from_iterable(columns.values()))) <= _PLAIN_TYPES)


def _signed(seq: int, chunk: dict[str, Any]) -> str:
    """A chunk line signed with the CRC-32 of its text after the ``"crc"`` member."""
    text = dumps(chunk)[1:]
    return f'{{"seq":{seq},"type":"metrics","crc":{zlib.crc32(text.encode())},{text}'


# What the daemon decides on as soon as it is written: the searcher's input (validations, a
# completed operation), a trial's own end, and checkpoints (preemption, retention). Training
# metrics, progress and the like wait for its next sweep of every live run.
_DECISIVE = frozenset({"searcher_completed", "early_exit", "preempt_ack", "checkpoint"})


def decisive(type_: str, body: Mapping[str, Any]) -> bool:
    """Whether an event is worth ringing the daemon's bell for."""
    return type_ in _DECISIVE or (type_ == "metrics" and body.get("group") == "validation")


def ring(bell: Path) -> None:
    """Ask the daemon to look at the run of ``bell`` (``layout.bell``) at its next tick.

    A ring that fails (no bell directory: a run tree of an older hpcdet) costs only the wait
    for the daemon's next sweep, which reads every live run anyway.
    """
    try:
        os.close(os.open(bell, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    except OSError as e:
        log.debug("could not ring %s: %s", bell, e)


def _truncate(path: Path, size: int) -> None:
    try:
        os.truncate(path, size)
    except OSError:
        pass


def _last_seq(path: Path) -> int:
    last = 0
    for batch in event_batches(path, 0):
        last = last if batch.last_seq is None else batch.last_seq
    return last


class FileWatch:
    """Cheap change detection for a small control file: one ``stat`` per ``changed()``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sig: tuple[int, int, int] | None = None

    def changed(self) -> bool:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return False
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        if sig != self._sig:
            self._sig = sig
            return True
        return False
