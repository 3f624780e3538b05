"""Streaming a trial's logs across all its runs (pause/resume and restarts included)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from hpcdet.errors import NotFoundError
from hpcdet.paths import StatePaths
from hpcdet.states import FINAL_TRIAL_STATES, ExperimentState, TrialState
from hpcdet.store.repository import Store
from hpcdet.views.logs import LogFilter, LogRecord, read_records


def format_record(r: LogRecord) -> str:
    return f"[{r.timestamp}] [{r.node}] || {r.message}"


def print_records(records: list[LogRecord], as_json: bool = False) -> None:
    for r in records:
        sys.stdout.write((json.dumps(r.to_dict()) if as_json else format_record(r)) + "\n")
    sys.stdout.flush()


def print_logs(paths: StatePaths, exp_id: int, trial_id: int, offsets: dict[Path, int],
               which: LogFilter = LogFilter(), as_json: bool = False) -> None:
    """The lines written since ``offsets`` that ``which`` keeps (its head and tail aside)."""
    print_records([r for r in read_records(paths, exp_id, trial_id, offsets) if which.keeps(r)],
                  as_json)


def follow_trial(paths: StatePaths, trial_id: int, poll: float = 0.2,
                 which: LogFilter = LogFilter(), as_json: bool = False,
                 announce: bool = True) -> int:
    """Print the trial's logs until it ends (with ``which.tail``, only that many of the lines
    so far first); 0 if it completed, 1 otherwise."""
    store = Store(paths.database(), readonly=True)
    trial = store.trial(trial_id)
    if announce:
        print("Waiting for first trial to begin...")
        print(f"Following first trial with ID {trial_id}")
    offsets: dict[Path, int] = {}
    print_records(which.apply(read_records(paths, trial.experiment_id, trial_id, offsets)),
                  as_json)
    while True:
        print_logs(paths, trial.experiment_id, trial_id, offsets, which, as_json)
        try:
            trial = store.trial(trial_id)
            exp = store.experiment(trial.experiment_id)
        except NotFoundError:
            return 1
        paused = exp.state == ExperimentState.PAUSED and trial.state == TrialState.PAUSED
        if trial.state in FINAL_TRIAL_STATES or paused:
            time.sleep(poll)
            print_logs(paths, trial.experiment_id, trial_id, offsets, which, as_json)
            break
        time.sleep(poll)
    if announce:
        reason = f" ({trial.end_reason})" if trial.end_reason else ""
        print(f"Trial {trial_id} ended as {trial.state}{reason}.")
        print(f"Trial log stream ended. To reopen log stream, run: hpcdet trial logs -f "
              f"{trial_id}")
    return 0 if trial.state == TrialState.COMPLETED else 1
