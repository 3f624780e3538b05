"""Streaming a trial's logs across all its runs (pause/resume and restarts included)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from hpcdet.cli.common import paths, read_store, visible
from hpcdet.errors import NotFoundError, UsageError
from hpcdet.paths import StatePaths
from hpcdet.states import FINAL_TRIAL_STATES, ExperimentState, TrialState
from hpcdet.views import lookups
from hpcdet.views.logs import (
    LEVELS,
    LogFilter,
    LogRecord,
    parse_time,
    read_records,
    trial_log,
)

# The options of `trial logs`, which `experiment logs` takes too.
Follow = Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming.")]
Head = Annotated[Optional[int], typer.Option("--head", min=0, help="Only the first N lines.")]
Tail = Annotated[Optional[int], typer.Option(
    "--tail", min=0, help="Only the last N lines (with -f: then the new ones).")]
RankIds = Annotated[Optional[list[int]], typer.Option(
    "--rank-id", help="Only lines of this rank (repeat for several).")]
Level = Annotated[Optional[str], typer.Option(
    "--level", help=f"Only lines of this level or higher: {', '.join(LEVELS)}.")]
JsonLines = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]
After = Annotated[Optional[str], typer.Option(
    "--timestamp-after", help="Only lines written after this time (2021-10-26T23:17:12Z).")]
Before = Annotated[Optional[str], typer.Option(
    "--timestamp-before", help="Only lines written before this time.")]


def show_logs(trial_id: int, follow: bool, head: int | None, tail: int | None,
              rank_ids: list[int] | None, level: str | None, as_json: bool,
              after: str | None = None, before: str | None = None) -> int:
    """`trial logs` with its filters; the exit code (with --follow, 1 unless it completed)."""
    if head is not None and (tail is not None or follow):
        raise UsageError("--head cannot be combined with --tail or --follow")
    if level is not None and level.upper() not in LEVELS:
        raise UsageError(f"--level must be one of {', '.join(LEVELS)}, not {level!r}")
    which = LogFilter(
        frozenset(rank_ids or ()), level.upper() if level else None, head, tail,
        parse_time("--timestamp-after", after) if after else None,
        parse_time("--timestamp-before", before) if before else None)
    p = paths()
    trial = lookups.trial(read_store(p), trial_id)
    if follow:
        return follow_trial(p, trial_id, which=which, as_json=as_json, announce=False)
    print_records(trial_log(p, trial.experiment_id, trial_id, which), as_json)
    return 0


def format_record(r: LogRecord) -> str:
    """A log line as printed: a trial's escape sequences, carriage returns and bidi overrides
    shown as visible escapes (tabs kept), to a terminal or not, since a pipe often ends on
    one (``| grep``, ``| tail``); ``--json`` gives the text as written."""
    line: str = visible(f"[{r.timestamp}] [{r.node}] || {r.message}", keep_lines=True)
    return line


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
    from hpcdet.views.access import open_database

    store = open_database(paths)
    trial = lookups.trial(store, trial_id)
    if announce:
        print("Waiting for first trial to begin...")
        print(f"Following first trial with ID {trial_id}")
    offsets: dict[Path, int] = {}
    print_records(trial_log(paths, trial.experiment_id, trial_id, which, offsets), as_json)
    while True:
        print_logs(paths, trial.experiment_id, trial_id, offsets, which, as_json)
        try:
            trial = lookups.trial(store, trial_id)
            exp = lookups.experiment(store, trial.experiment_id)
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
