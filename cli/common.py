"""Shared bits of the CLI: where the state is, read access, and output."""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from hpcdet.daemon import process
from hpcdet.errors import DaemonError
from hpcdet.paths import StatePaths, state_dir
from hpcdet.store.ids import id_problem
from hpcdet.store.repository import Store

# Piped output (tests, scripts, `| less`) gets wide tables instead of rich's 80 columns.
console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


def _parse_id(value: str) -> int:
    """An experiment or trial id; anything else is a usage error before any work is done."""
    text = str(value).strip()
    number: object = int(text) if text.isascii() and text.isdigit() else text
    problem = id_problem(number)
    if problem is not None:
        raise typer.BadParameter(problem)
    assert isinstance(number, int)
    return number


ExperimentId = Annotated[int, typer.Argument(parser=_parse_id)]
TrialId = Annotated[int, typer.Argument(parser=_parse_id)]


def paths() -> StatePaths:
    return StatePaths(state_dir())


def read_store(p: StatePaths) -> Store:
    """The database, read-only; it lives on the daemon's host."""
    current = process.info(p)
    if current.record and not current.here:
        raise DaemonError(
            f"the database of {p.root} is on host {current.record['host']}, where the daemon "
            f"runs (pid {current.record['pid']}); run this command there"
        )
    if not p.database().exists():
        process.start(p)
    return Store(p.database(), readonly=True)


def when(ts: float | None) -> str:
    if not ts:
        return ""
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> None:
    t = Table(*columns, title=title, show_lines=False)
    for row in rows:
        t.add_row(*["" if v is None else str(v) for v in row])
    console.print(t)


def print_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    import csv
    import sys

    w = csv.writer(sys.stdout)
    w.writerow(columns)
    w.writerows(rows)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))
