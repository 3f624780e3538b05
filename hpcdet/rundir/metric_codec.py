"""How metric reports are written and read: the one encoder and the decoders of a metrics
line of the event log (a report, or a chunk of reports) and of a chunk's text as the store
keeps it, down to the JSON paths by which SQL reads a value in it.

A chunk line holds consecutive reports of one group and the same metrics, written by one
flush: ``{"seq":..,"type":"metrics"[,"crc":..],"time":..,"group":..,"steps":[..],
"columns":{"<metric>":[<value per step>,..],..}}``. The store keeps its ``columns`` text as
a row's metrics and its ``steps`` as the row's steps JSON, as they stand, or the columns of
consecutive lines joined column by column (``join_columns``).
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Mapping
from functools import cache, lru_cache
from itertools import accumulate, chain, compress, repeat
from operator import itemgetter
from typing import Any, NamedTuple, cast

from hpcdet.rundir.atomic import dumps

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
# are, and read back cut or filled with null: ``report_texts``).
_TEXT = r"[ !#-\[\]-~]*+"  # printable ASCII but " and \, so a JSON string's value is its text
_COLUMN_TEXT = r"[ !#-+\--Z^-z|~]*+"  # the same without , [ ] { }
_INT = r"(?:0|[1-9][0-9]*+)"
# A seq or a step: up to 18 digits fit SQLite's integer; a line with more is decoded whole, and
# kept if its numbers fit (``is_int64``).
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
def lines_pattern() -> re.Pattern[str]:
    """Matches each line: the line, then its eight fields if it is such a metrics line (seq,
    CRC, time, group, the chunk's mark, the (first) step, the rest of a chunk's steps from
    their first comma, the metrics' text or the chunk's columns'). Compiled at the first read
    (~1.5 ms): the trial side and most CLI commands import this module to write, never to read."""
    return re.compile(rf"^({_METRICS_LINE}|[^\n]*+)$", re.MULTILINE)


STRIDE = 10  # what its split gives of each line: the text before it, the line, eight fields
# A column of a chunk's text the pattern let in: its metric's name and its values' text.
_COLUMNS = re.compile(r'"([^"]*)":\[([^\]]*)\]')


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
    pairs = _COLUMNS.findall("".join(texts))
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


NO_CHUNKS = Chunks([], [], [], [])


# A chunk's text as the store keeps it: its columns (a row's metrics) and its steps JSON.


def report_texts(columns_json: str, reports: int) -> list[str]:
    """The metrics text of each report of a chunk's columns. The pattern that let the chunk
    in admits none of ``,[]{}`` inside its strings, so its columns are found by their
    brackets and their values split at commas. A column of another length than the chunk's
    steps (only a trial that forged a signed line writes one) is cut or filled with null."""
    columns = [(name, _values(values, reports)) for name, values in _COLUMNS.findall(columns_json)]
    return ["{" + ",".join(f'"{name}":{values[k]}' for name, values in columns) + "}"
            for k in range(reports)]


def _values(text: str, reports: int) -> list[str]:
    values = text.split(",")
    return values if len(values) == reports else (values + ["null"] * reports)[:reports]


def column_names(columns_json: str) -> list[str]:
    """The metric names of a chunk's columns, in order."""
    return [name for name, _ in _COLUMNS.findall(columns_json)]


def join_columns(found: ChunkColumns, first: int, end: int) -> str:
    """The columns text of chunk lines ``first`` to ``end`` of ``found`` (consecutive, of the
    same metrics) as one chunk's: their values joined column by column, a column at a time
    (the lines' values lie in ``found.values`` a line's width apart)."""
    start, stop = found.starts[first], found.starts[end]
    width = found.starts[first + 1] - start
    return "{" + ",".join(
        f'"{name}":[' + ",".join(found.values[start + j:stop:width]) + "]"
        for j, name in enumerate(found.names[start:start + width])) + "}"


def encode_steps(steps: list[str]) -> str:
    """The steps JSON of a chunk of lines whose steps' texts are ``steps`` ("1,2,3")."""
    return "[" + ",".join(steps) + "]"


def decode_steps(steps_json: str) -> list[int]:
    """The steps of a chunk's steps JSON."""
    steps: list[int] = json.loads(steps_json)
    return steps


# SQLite's JSON paths into the same text, for queries that read one value of a chunk without
# decoding it. Each takes and gives SQL expressions: the caller names its columns.


def json_member(name: str) -> str:
    """The JSON path step (after ``$``) of metric ``name``, quoted whatever its characters."""
    return "." + json.dumps(name)


def sql_step_at(steps_json: str, index: str) -> str:
    """The step of report ``index`` (from 0) of a chunk whose steps JSON is ``steps_json``."""
    return f"json_extract({steps_json}, '$[' || ({index}) || ']')"


def sql_value_at(metrics_json: str, member: str, reports: str, index: str) -> str:
    """The value of the metric whose ``json_member`` is ``member`` in report ``index`` of a
    row of ``reports`` reports whose metrics text is ``metrics_json``: a report's metrics
    object if it holds one, else a chunk's columns."""
    return (f"json_extract({metrics_json}, '$' || {member} || CASE {reports} WHEN 1 THEN '' "
            f"ELSE '[' || ({index}) || ']' END)")



# The one group of reports the daemon's feed reads (the searcher's validations); the others
# are stored and never looked at one by one.
FED_GROUP = "validation"


_SIGNED_HEAD = len('{"seq":,"type":"metrics","crc":,')


def check_signed(lines: list[str], columns: list[list[str | None]], crcs: list[str | None]
                  ) -> None:
    """Signed lines whose CRC does not match their text lose their fields, to be decoded
    whole like any line the pattern did not match."""
    for i in compress(range(len(crcs)), crcs):
        seq, crc = cast(str, columns[0][i]), cast(str, crcs[i])
        signed = lines[i][_SIGNED_HEAD + len(seq) + len(crc):]
        if zlib.crc32(signed.encode("latin-1")) != int(crc):
            for column in (*columns, crcs):
                column[i] = None


def chunk_lines(columns: list[list[str | None]], crcs: list[str | None]) -> Chunks:
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
        return chunk_lines(columns, crcs)
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
                   if any(values.count(",") != n for _, values in _COLUMNS.findall(text))]


def is_int64(value: Any) -> bool:
    """Whether ``value`` is an int SQLite can store, as a seq or a step must be."""
    return type(value) is int and -(2**63) <= value < 2**63


def is_report(body: Mapping[str, Any]) -> bool:
    """Whether a decoded metrics report holds what storing it needs."""
    return (isinstance(body.get("group"), str) and is_int64(body.get("steps_completed"))
            and isinstance(body.get("metrics"), dict) and type(body.get("time")) in (int, float))


def decoded_reports(body: dict[str, Any]) -> list[dict[str, Any]] | None:
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


_REPORT_KEYS = frozenset({"group", "steps_completed", "metrics", "batch_metrics"})


def _chunkable(type_: str, body: Mapping[str, Any]) -> bool:
    """Whether an event is a report a chunk line can hold: a Core API report without batch
    metrics, of a group but the one the feed reads."""
    return (type_ == "metrics" and body.keys() <= _REPORT_KEYS
            and isinstance(body.get("group"), str) and body["group"] != FED_GROUP
            and "steps_completed" in body and "metrics" in body
            and body.get("batch_metrics") is None)


def encode_lines(pending: list[tuple[str, dict[str, Any]]], seq: int, now: float) -> list[str]:
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


