"""A trial's logs: every node's output of every run, read incrementally as whole lines."""

from __future__ import annotations

import datetime
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hpcdet.errors import UsageError
from hpcdet.paths import StatePaths
from hpcdet.rundir import layout


@dataclass(frozen=True)
class LogLine:
    node: str  # "run-<R>/node-<rank>"
    text: str  # as the harness wrote it: a timestamp, a space, the trial's line


def log_files(paths: StatePaths, exp_id: int, trial_id: int) -> list[Path]:
    """The per-node logs of every run of the trial, in run order."""
    trial_dir = paths.trial(exp_id, trial_id)
    runs = sorted(trial_dir.glob("run-*"), key=lambda d: int(d.name[4:]))
    return [f for r in runs for f in layout.node_logs(r)]


# A view holds at most this much of one node log at a time: the first view of a huge log starts
# this far from its end (the UI's 2,000 lines, at up to 500 bytes each), a follow-up reads on
# in chunks of it (the next poll reads the rest).
VIEW_BYTES = 2**20
# Reading backwards for the last lines of a log: the block, and the longest line kept whole.
BLOCK = 2**20


def _node(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.stem}"


def _lines(node: str, data: bytes) -> list[LogLine]:
    return [LogLine(node, line) for line in data.decode(errors="replace").splitlines()]


def read_from(path: Path, offset: int | None, limit: int = VIEW_BYTES
              ) -> tuple[list[LogLine], int, int]:
    """The whole lines of ``path`` from ``offset``, at most ``limit`` bytes of them (None: the
    lines beginning in the last ``limit`` bytes); the offset past them, and how many bytes
    before them a first view left out. A line longer than ``limit`` comes in pieces."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if offset is None and size > limit:
            f.seek(size - limit - 1)
            window = f.read(limit + 1)
            start = window.find(b"\n") + 1
            if start == 0:  # the window is inside one line: nothing whole to show yet
                return [], size, size
            offset, data = size - limit - 1 + start, window[start:]
            skipped = offset
        else:
            offset = offset or 0
            f.seek(offset)
            data, skipped = f.read(limit), 0
    end = data.rfind(b"\n") + 1
    if end == 0 and len(data) == limit:
        end = limit
    return _lines(_node(path), data[:end]), offset + end, skipped


def new_log_lines(paths: StatePaths, exp_id: int, trial_id: int,
                  offsets: dict[Path, int]) -> list[list[LogLine]]:
    """The whole lines written since ``offsets`` (updated), one list per log file, the whole
    rest of each file (``trial logs`` without --tail shows them all)."""
    chunks = []
    for path in log_files(paths, exp_id, trial_id):
        while True:
            lines, offsets[path], _ = read_from(path, offsets.get(path, 0))
            if not lines:
                break
            chunks.append(lines)
    return chunks


def lines_backwards(path: Path, end: int) -> Iterator[LogLine]:
    """The lines of ``path`` before ``end`` (just past a newline), last first, read from
    there in blocks; a line longer than 8 blocks is cut to its end."""
    node = _node(path)
    pos = end - 1  # before the last newline: whole lines only
    if pos < 0:
        return
    rest = b""
    with open(path, "rb") as f:
        while pos > 0:
            step = min(BLOCK, pos)
            pos -= step
            f.seek(pos)
            parts = (f.read(step) + rest).split(b"\n")
            rest = parts[0][-8 * BLOCK:]
            for part in reversed(parts[1:]):
                yield from reversed(_lines(node, part) or [LogLine(node, "")])
    yield from reversed(_lines(node, rest) or [LogLine(node, "")])


# det.LOG_FORMAT starts a line with its level; wrap_rank puts "[rank=N] " before it.
_RANK = re.compile(r"^\[rank=(\d+)\] ")
# Python logging's level names, low to high (importing logging for them cost every CLI
# command ~2 ms); one string, since a level is no experiment state, whose ERROR is spelled
# only in hpcdet.states.
LEVELS = tuple("TRACE DEBUG INFO WARNING ERROR CRITICAL".split())
_LEVEL = re.compile(rf"^({'|'.join(LEVELS)}): ")


@dataclass(frozen=True)
class LogRecord:
    """One line of a trial's log with what Determined's log filters look at."""

    timestamp: str
    node: str  # "run-<R>/node-<rank>"
    rank_id: int | None  # the [rank=N] prefix of wrap_rank, if there is one
    level: str | None  # the det.LOG_FORMAT level the line starts with, if any
    message: str  # the line as the trial wrote it

    @classmethod
    def parse(cls, line: LogLine) -> LogRecord:
        stamp, _, text = line.text.partition(" ")
        rank = _RANK.match(text)
        level = _LEVEL.match(text[rank.end():] if rank else text)
        return cls(stamp, line.node, int(rank.group(1)) if rank else None,
                   level.group(1) if level else None, text)

    def to_dict(self) -> dict[str, object]:
        """The stable form of ``trial logs --json``, one object per line."""
        return {"timestamp": self.timestamp, "node": self.node, "rank_id": self.rank_id,
                "level": self.level, "message": self.message}


def when_written(record: LogRecord) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(record.timestamp)
    except ValueError:
        return None


def parse_time(option: str, text: str) -> datetime.datetime:
    """An RFC 3339 time as det's log options take it (2021-10-26T23:17:12Z); without a zone,
    UTC.

    Raises:
        UsageError: it is not one.
    """
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{option} takes an RFC 3339 time such as 2021-10-26T23:17:12Z, "
                         f"not {text!r}") from None
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


@dataclass(frozen=True)
class LogFilter:
    """Determined's ``trial logs`` filters: ranks, a lowest level, the first or last lines.
    A line without a level passes a level filter only at INFO and below, as plain output
    of a trial is INFO to Determined."""

    rank_ids: frozenset[int] = frozenset()
    level: str | None = None
    head: int | None = None
    tail: int | None = None
    after: datetime.datetime | None = None  # only lines written after this time
    before: datetime.datetime | None = None  # only lines written before it

    def keeps(self, record: LogRecord) -> bool:
        if self.rank_ids and record.rank_id not in self.rank_ids:
            return False
        if self.after is not None or self.before is not None:
            when = when_written(record)
            if when is None or (self.after is not None and when <= self.after) or (
                    self.before is not None and when >= self.before):
                return False
        if self.level is not None:
            have = LEVELS.index(record.level or "INFO")
            return have >= LEVELS.index(self.level)
        return True

    def apply(self, records: list[LogRecord]) -> list[LogRecord]:
        kept = [r for r in records if self.keeps(r)]
        if self.head is not None:
            kept = kept[:self.head]
        if self.tail is not None:
            kept = kept[-self.tail:] if self.tail else []
        return kept


def trial_log(paths: StatePaths, exp_id: int, trial_id: int, which: LogFilter,
              offsets: dict[Path, int] | None = None) -> list[LogRecord]:
    """The trial's whole log so far, filtered; with ``which.tail`` (and no head) read from
    the end, so that memory and time do not grow with the log. ``offsets`` (updated) are
    set past what was read."""
    offsets = {} if offsets is None else offsets
    if which.tail is None or which.head is not None:
        return which.apply(read_records(paths, exp_id, trial_id, offsets))
    last: list[LogRecord] = []
    for path in log_files(paths, exp_id, trial_id):
        offsets[path] = end = _last_line_end(path)  # where a follow reads on
        kept = (r for r in map(LogRecord.parse, lines_backwards(path, end)) if which.keeps(r))
        last.extend(reversed(list(itertools.islice(kept, which.tail))))
    last.sort(key=lambda r: r.timestamp)
    return last[-which.tail:] if which.tail else []


def _last_line_end(path: Path) -> int:
    """The offset just past the log's last newline (what follows is a line being written)."""
    with open(path, "rb") as f:
        pos = f.seek(0, 2)
        while pos > 0:
            step = min(BLOCK, pos)
            pos -= step
            f.seek(pos)
            found = f.read(step).rfind(b"\n")
            if found >= 0:
                return pos + found + 1
    return 0


def read_records(paths: StatePaths, exp_id: int, trial_id: int, offsets: dict[Path, int]
                 ) -> list[LogRecord]:
    """The lines written since ``offsets`` (updated), every node's merged in time order."""
    records = [LogRecord.parse(line) for chunk in new_log_lines(paths, exp_id, trial_id, offsets)
               for line in chunk]
    return sorted(records, key=lambda r: r.timestamp)


def log_page(paths: StatePaths, exp_id: int, trial_id: int, cursor: dict[str, int],
             tail: int) -> tuple[list[LogRecord], dict[str, int], int, int]:
    """The lines written since ``cursor`` (log file, relative to the trial's directory, to
    offset; a file not in it is read from near its end), at most ``VIEW_BYTES`` of each file
    and the last ``tail`` lines of them; the cursor past them, how many lines this page left
    out, and how many bytes of log before them a first view did not read."""
    trial_dir = paths.trial(exp_id, trial_id)
    offsets = {trial_dir / name: int(at) for name, at in cursor.items()
               if ".." not in name and not name.startswith("/")}
    records: list[LogRecord] = []
    skipped = 0
    for path in log_files(paths, exp_id, trial_id):
        lines, offsets[path], left = read_from(path, offsets.get(path))
        skipped += left
        records.extend(LogRecord.parse(line) for line in lines)
    records.sort(key=lambda r: r.timestamp)
    moved = {str(path.relative_to(trial_dir)): at for path, at in offsets.items()}
    return records[-tail:], moved, max(0, len(records) - tail), skipped
