"""A node's idle GPUs, harness -> readers: ``nodes/<rank>.gpu-idle.json``, rewritten by the
harness's GPU watch (``hpcdet.launch.gpu_watch``) whenever the GPUs idle past its threshold
change, and read by `describe` and the web UI (``hpcdet.views.usage``).

It is a file of its own, not an event in ``events.jsonl``: that log has one writer, the
trial's, which numbers its lines and cuts a torn tail before each append; a second writer
in the harness would tear or renumber the trial's lines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpcdet.rundir import layout
from hpcdet.rundir.atomic import write_atomic

SUFFIX = ".gpu-idle.json"


def path(run_dir: Path, rank: int) -> Path:
    return run_dir / layout.NODES_DIR / f"{rank}{SUFFIX}"


def write(run_dir: Path, rank: int, record: dict[str, Any]) -> None:
    """``{"host", "threshold", "time", "gpus": [{"index", "uuid", "idle_since"}]}``: the GPUs
    idle past the threshold now (none once they work again)."""
    write_atomic(path(run_dir, rank), record, durable=False)


def read_all(run_dir: Path) -> list[dict[str, Any]]:
    """Every node's record of a run, by rank; an unreadable one is left out (a reader on
    another host may see it mid-replace on some file systems), and so is a run directory
    that cannot be read (the daemon reports that as its fault)."""
    found = []
    try:
        files = sorted((run_dir / layout.NODES_DIR).glob(f"*{SUFFIX}"))
    except OSError:
        return []
    for file in files:
        try:
            record = json.loads(file.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("gpus"), list):
            found.append(record)
    return found
