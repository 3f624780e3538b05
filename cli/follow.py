"""Streaming a trial's logs across all its runs (pause/resume and restarts included)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hpcdet.errors import NotFoundError
from hpcdet.paths import StatePaths
from hpcdet.states import FINAL_TRIAL_STATES, ExperimentState, TrialState
from hpcdet.store.repository import Store


def format_line(raw: str, node: str) -> str:
    stamp, _, text = raw.partition(" ")
    return f"[{stamp}] [{node}] || {text}"


def log_files(paths: StatePaths, exp_id: int, trial_id: int) -> list[Path]:
    trial_dir = paths.trial(exp_id, trial_id)
    runs = sorted(trial_dir.glob("run-*"), key=lambda d: int(d.name[4:]))
    return [f for r in runs for f in sorted((r / "logs").glob("node-*.log"))]


def print_logs(paths: StatePaths, exp_id: int, trial_id: int,
               offsets: dict[Path, int]) -> None:
    for path in log_files(paths, exp_id, trial_id):
        with open(path, "rb") as f:
            f.seek(offsets.get(path, 0))
            data = f.read()
        end = data.rfind(b"\n") + 1
        if end == 0:
            continue
        offsets[path] = offsets.get(path, 0) + end
        node = f"{path.parent.parent.name}/{path.stem}"
        for line in data[:end].decode(errors="replace").splitlines():
            sys.stdout.write(format_line(line, node) + "\n")
        sys.stdout.flush()


def follow_trial(paths: StatePaths, trial_id: int, poll: float = 0.2) -> int:
    """Print the trial's logs until it ends; 0 if it completed, 1 otherwise."""
    store = Store(paths.database(), readonly=True)
    trial = store.trial(trial_id)
    print("Waiting for first trial to begin...")
    print(f"Following first trial with ID {trial_id}")
    offsets: dict[Path, int] = {}
    while True:
        print_logs(paths, trial.experiment_id, trial_id, offsets)
        try:
            trial = store.trial(trial_id)
            exp = store.experiment(trial.experiment_id)
        except NotFoundError:
            return 1
        paused = exp.state == ExperimentState.PAUSED and trial.state == TrialState.PAUSED
        if trial.state in FINAL_TRIAL_STATES or paused:
            time.sleep(poll)
            print_logs(paths, trial.experiment_id, trial_id, offsets)
            break
        time.sleep(poll)
    reason = f" ({trial.end_reason})" if trial.end_reason else ""
    print(f"Trial {trial_id} ended as {trial.state}{reason}.")
    print(f"Trial log stream ended. To reopen log stream, run: hpcdet trial logs -f {trial_id}")
    return 0 if trial.state == TrialState.COMPLETED else 1
