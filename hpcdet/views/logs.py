"""A trial's logs: every node's output of every run, read incrementally as whole lines."""

from __future__ import annotations

import datetime
import re
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


def new_log_lines(paths: StatePaths, exp_id: int, trial_id: int,
                  offsets: dict[Path, int]) -> list[list[LogLine]]:
    """The whole lines written since ``offsets`` (updated), one list per log file."""
    chunks = []
    for path in log_files(paths, exp_id, trial_id):
        with open(path, "rb") as f:
            f.seek(offsets.get(path, 0))
            data = f.read()
        end = data.rfind(b"\n") + 1
        if end == 0:
            continue
        offsets[path] = offsets.get(path, 0) + end
        node = f"{path.parent.parent.name}/{path.stem}"
        chunks.append([LogLine(node, line)
                       for line in data[:end].decode(errors="replace").splitlines()])
    return chunks


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


def trial_log(paths: StatePaths, exp_id: int, trial_id: int, which: LogFilter
              ) -> list[LogRecord]:
    """The trial's whole log so far, filtered."""
    return which.apply(read_records(paths, exp_id, trial_id, {}))


def read_records(paths: StatePaths, exp_id: int, trial_id: int, offsets: dict[Path, int]
                 ) -> list[LogRecord]:
    """The lines written since ``offsets`` (updated), every node's merged in time order."""
    records = [LogRecord.parse(line) for chunk in new_log_lines(paths, exp_id, trial_id, offsets)
               for line in chunk]
    return sorted(records, key=lambda r: r.timestamp)


def log_page(paths: StatePaths, exp_id: int, trial_id: int, cursor: dict[str, int],
             tail: int) -> tuple[list[LogRecord], dict[str, int], int]:
    """The lines written since ``cursor`` (log file, relative to the trial's directory, to
    offset), at most the last ``tail`` of them; the cursor past them, and how many earlier
    lines were left out."""
    trial_dir = paths.trial(exp_id, trial_id)
    offsets = {trial_dir / name: int(at) for name, at in cursor.items()
               if ".." not in name and not name.startswith("/")}
    records = read_records(paths, exp_id, trial_id, offsets)
    moved = {str(path.relative_to(trial_dir)): at for path, at in offsets.items()}
    return records[-tail:], moved, max(0, len(records) - tail)
