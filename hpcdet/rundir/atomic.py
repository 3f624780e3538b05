"""Files written so that a reader never sees half of them: small JSON files replaced whole
(write a temporary file, fsync, rename), and append-only JSON-lines files (the run's event log,
the daemon's journals) appended whole lines at a time and read a whole line at a time.

A writer that died mid-line leaves a torn tail, which readers skip and the next writer cuts
off before appending. A whole line that is not a JSON object (a damaged file) is skipped and
logged once with its byte offset.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

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
                    yield start, pos, parse_line(path, start, raw)


_READ_CHUNK = 1 << 20


def parse_line(path: str | Path, start: int, raw: bytes) -> dict[str, Any] | None:
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



def _truncate(path: Path, size: int) -> None:
    try:
        os.truncate(path, size)
    except OSError:
        pass

