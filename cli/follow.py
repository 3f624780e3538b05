"""Streaming a trial's logs across all its runs (pause/resume and restarts included)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hpcdet.errors import NotFoundError
from hpcdet.paths import StatePaths
from hpcdet.states import FINAL_TRIAL_STATES, ExperimentState, TrialState
from hpcdet.store.repository import Store
from hpcdet.views.logs import new_log_lines


def format_line(raw: str, node: str) -> str:
    stamp, _, text = raw.partition(" ")
    return f"[{stamp}] [{node}] || {text}"


def print_logs(paths: StatePaths, exp_id: int, trial_id: int,
               offsets: dict[Path, int]) -> None:
    for chunk in new_log_lines(paths, exp_id, trial_id, offsets):
        for line in chunk:
            sys.stdout.write(format_line(line.text, line.node) + "\n")
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
