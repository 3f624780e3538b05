"""Determined's `trial logs` filters over hpcdet's log lines (pure)."""

from __future__ import annotations

import pytest

from hpcdet.errors import UsageError
from hpcdet.views.logs import LogFilter, LogLine, LogRecord, parse_time


def _records(*texts: str) -> list[LogRecord]:
    return [LogRecord.parse(LogLine("run-1/node-0", f"2026-01-01T00:00:{i:02d} {t}"))
            for i, t in enumerate(texts)]


LINES = _records(
    "[rank=0] INFO: [12] root: step 1",
    "[rank=1] WARNING: [13] root: slow",
    "plain output",
    "ERROR: [12] determined.core: broke",
    "[rank=1] DEBUG: [13] root: detail",
)


def test_a_line_gives_its_rank_and_level() -> None:
    assert [(r.rank_id, r.level) for r in LINES] == [
        (0, "INFO"), (1, "WARNING"), (None, None), (None, "ERROR"), (1, "DEBUG")]
    assert LINES[0].message == "[rank=0] INFO: [12] root: step 1"
    assert LINES[0].to_dict()["timestamp"] == "2026-01-01T00:00:00"


def test_rank_level_head_and_tail() -> None:
    def kept(which: LogFilter) -> list[int]:
        return [LINES.index(r) for r in which.apply(LINES)]

    assert kept(LogFilter()) == [0, 1, 2, 3, 4]
    assert kept(LogFilter(rank_ids=frozenset({1}))) == [1, 4]
    assert kept(LogFilter(level="WARNING")) == [1, 3]
    assert kept(LogFilter(level="INFO")) == [0, 1, 2, 3]  # a line with no level is INFO
    assert kept(LogFilter(head=2)) == [0, 1]
    assert kept(LogFilter(tail=2)) == [3, 4]
    assert kept(LogFilter(tail=0)) == []
    assert kept(LogFilter(rank_ids=frozenset({1}), tail=1)) == [4]


def test_lines_between_two_times() -> None:
    after = parse_time("--timestamp-after", "2026-01-01T00:00:01")
    before = parse_time("--timestamp-before", "2026-01-01T00:00:04Z")
    stamped = [LogRecord.parse(LogLine("run-1/node-0", f"2026-01-01T00:00:{i:02d}+00:00 l{i}"))
               for i in range(6)]
    kept = LogFilter(after=after, before=before).apply(stamped)
    assert [r.message for r in kept] == ["l2", "l3"]
    with pytest.raises(UsageError, match="RFC 3339"):
        parse_time("--timestamp-after", "yesterday")
