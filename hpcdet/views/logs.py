"""A trial's logs: every node's output of every run, read incrementally as whole lines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
