"""Durations, sizes, times and index ranges: parsed and formatted as PBS writes them."""

from __future__ import annotations

import re
import time

# ---------------------------------------------------------------------------------------------
# Small parsers and formatters.
# ---------------------------------------------------------------------------------------------


def parse_duration(text: str) -> int:
    """pbs_resources.7B duration: [[hours:]minutes:]seconds[.milliseconds]."""
    parts = text.strip().split(":")
    if not 1 <= len(parts) <= 3 or not all(re.fullmatch(r"\d+(\.\d+)?", p) for p in parts):
        raise ValueError(text)
    total = 0.0
    for p in parts:
        total = total * 60 + float(p)
    return int(total)


def fmt_duration(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


SIZE_UNITS = {"": 1, "b": 1, "w": 8, "kb": 1024, "kw": 8192, "mb": 1024**2, "mw": 8 * 1024**2,
              "gb": 1024**3, "gw": 8 * 1024**3, "tb": 1024**4, "tw": 8 * 1024**4,
              "pb": 1024**5, "pw": 8 * 1024**5}


def parse_size(text: str) -> int:
    """pbs_resources.7B size: integer with optional b|w|kb|mb|gb|tb|pb (or words)."""
    m = re.fullmatch(r"(\d+)([kmgtp]?[bw]?)", str(text).strip().lower())
    if not m:
        raise ValueError(text)
    return int(m.group(1)) * SIZE_UNITS[m.group(2)]


def fmt_kb(nbytes: int) -> str:
    return f"{(nbytes + 1023) // 1024}kb"


def fmt_size(nbytes: int) -> str:
    """A size in the largest unit that keeps it whole (e.g. 4gb), as qstat prints sizes."""
    for unit in ("pb", "tb", "gb", "mb", "kb"):
        if nbytes and nbytes % SIZE_UNITS[unit] == 0:
            return f"{nbytes // SIZE_UNITS[unit]}{unit}"
    return f"{nbytes}b"


def ctime_str(t: float) -> str:
    # qstat -f prints timestamps like ctime(3): "Tue Nov 24 10:00:00 2026".
    return time.ctime(t)


def comment_time(t: float) -> str:
    # Scheduler comments read "Job run at Tue Oct 11 at 08:13 on (...)".
    return time.strftime("%a %b %d at %H:%M", time.localtime(t))


def fmt_ranges(indices: list[int], step: int = 1) -> str:
    """Compress indices to 'X-Y[:Z]' runs joined by commas, like array_indices_remaining
    (pbs_job_attributes.7B: 'Range or list of ranges, e.g. 500, 552, 596-1000')."""
    if not indices:
        return "-"
    runs: list[str] = []
    start = prev = indices[0]
    for i in indices[1:] + [None]:  # type: ignore[list-item]
        if i is not None and i - prev == step:
            prev = i
            continue
        if prev == start:
            runs.append(str(start))
        else:
            runs.append(f"{start}-{prev}" + (f":{step}" if step != 1 else ""))
        if i is not None:
            start = prev = i
    return ",".join(runs)
