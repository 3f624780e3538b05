"""The invocation log: one JSON line per invocation in $HPCDET_APPTAINER_DOUBLE_LOG.

Tests read it to count pulls.  Each record goes out in a single write(2) on an O_APPEND
descriptor, so concurrent invocations never interleave their lines.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence

LOG_VAR = "HPCDET_APPTAINER_DOUBLE_LOG"


def record(tool: str, argv: Sequence[str], subcommand: str, extra: Mapping[str, object],
           environ: Mapping[str, str]) -> None:
    path = environ.get(LOG_VAR)
    if not path:
        return
    entry: dict[str, object] = {
        "tool": tool,
        "argv": [tool, *argv],
        "cwd": _cwd(),
        "pid": os.getpid(),
        "time": time.time(),
        "subcommand": subcommand,
    }
    entry.update(extra)
    line = (json.dumps(entry) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except FileNotFoundError:
        return None
