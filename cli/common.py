"""Shared bits of the CLI: where the state is, read access, and output.

Every command's module imports this one, and `hpcdet` imports every command's module to build
its command tree: what is imported here (and at the top of a command's module) is paid by
every command, `hpcdet version` included. rich, the ORM and the daemon link are imported where
a command uses them.
"""

from __future__ import annotations

import csv
import datetime
import json
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Annotated, Any, Optional

import typer

from hpcdet.ids import id_problem
from hpcdet.paths import StatePaths, state_dir
from hpcdet.text import escaped, is_control

if TYPE_CHECKING:
    from rich.console import Console

    from hpcdet.views.access import Queries, Reads


def visible(value: Any, keep_lines: bool = False) -> str:
    """A value as it may reach a terminal or a CSV file: control characters (escape sequences,
    carriage returns, bidi overrides) become visible escapes such as ``\\x1b``; ``keep_lines``
    keeps newlines and tabs (messages of several lines)."""
    text = "" if value is None else str(value)
    if text.isascii() and text.isprintable():  # most cells: nothing to escape
        return text
    return "".join(
        escaped(ch) if is_control(ch) and not (keep_lines and ch in "\n\t") else ch
        for ch in text
    )


class _TextConsole:
    """The CLI's only way to the terminal. Strings are text, never markup or emoji codes (an
    experiment named ``[/oops]`` or ``:x:`` prints as it is), with control characters
    neutralised by ``visible``. rich's console, made at the first print."""

    def __init__(self) -> None:
        self._rich: Console | None = None

    def print(self, *objects: Any, **kwargs: Any) -> None:
        shown = [visible(o, keep_lines=True) if isinstance(o, str) else o for o in objects]
        if self.plain(shown, kwargs):
            sys.stdout.write(" ".join(shown) + "\n")
            sys.stdout.flush()
            return
        self.rich().print(*shown, **kwargs)

    @staticmethod
    def plain(shown: list[Any], kwargs: dict[str, Any]) -> bool:
        """Whether rich would print these unchanged: text without tabs (rich expands them),
        to a pipe or file, with no option but markup or highlighting off. Most commands print
        only such lines, and need not import rich for them."""
        return (not sys.stdout.isatty() and all(kwargs.get(k) is False for k in kwargs)
                and set(kwargs) <= {"markup", "highlight"}
                and all(isinstance(o, str) and "\t" not in o for o in shown))

    def rich(self) -> Console:
        if self._rich is None:
            from rich.console import Console

            # Piped output (tests, scripts, `| less`) gets wide tables instead of rich's 80
            # columns.
            self._rich = Console(highlight=False, markup=False, emoji=False, soft_wrap=True,
                                 width=None if sys.stdout.isatty() else 200)
        return self._rich


console = _TextConsole()


def parse_id(value: str) -> int:
    """An experiment or trial id; anything else is a usage error before any work is done."""
    text = str(value).strip()
    number: object = int(text) if text.isascii() and text.isdigit() else text
    problem = id_problem(number)
    if problem is not None:
        raise typer.BadParameter(problem)
    assert isinstance(number, int)
    return number


ExperimentId = Annotated[int, typer.Argument(parser=parse_id)]
TrialId = Annotated[int, typer.Argument(parser=parse_id)]


def _request_id(value: str | None) -> str | None:
    from hpcdet.protocol.filedrop import CALLER_REQUEST_ID

    if value is not None and not CALLER_REQUEST_ID.fullmatch(value):
        raise typer.BadParameter("1 to 80 letters, digits, '-' or '_', beginning with a "
                                 "letter or digit")
    return value


# Hidden: a laptop's (hpcdet.remote.upload), which sends the same create again after a
# dropped connection and gets the one experiment it made.
RequestId = Annotated[Optional[str], typer.Option("--request-id", hidden=True,
                                                  callback=_request_id)]


def paths() -> StatePaths:
    return StatePaths(state_dir())


def read_store(p: StatePaths) -> Queries:
    """The database through the ORM, read-only, where the daemon runs (started if need be)."""
    from hpcdet.views import access

    return access.read_store(p)


def open_reads(p: StatePaths) -> Reads:
    """The database through ``hpcdet.store.reads`` (no ORM), as ``read_store`` opens it."""
    from hpcdet.views import access

    return access.open_reads(p)


def when(ts: float | None) -> str:
    if not ts:
        return ""
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None,
    fold: bool = False,
) -> None:
    """A rich table on a terminal, plain text when piped (Determined's "presto" layout: one
    line per row, cells whole, for grep and awk). ``fold``: a narrow terminal folds long
    cells instead of cutting them short, and never breaks a uuid (for values copied from here
    into other commands)."""
    if not sys.stdout.isatty():
        _plain_table(columns, rows, title)
        return
    from rich.table import Table
    from rich.text import Text

    t = Table(title=None if title is None else Text(visible(title)), show_lines=False)
    for name in columns:  # metric names are columns too
        if fold:
            t.add_column(Text(visible(name)), overflow="fold", no_wrap="UUID" in name)
        else:
            t.add_column(Text(visible(name)))
    for row in rows:
        t.add_row(*[Text(visible(v)) for v in row])
    console.print(t)


def _plain_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None
                 ) -> None:
    cells = [[visible(c) for c in columns], *[[visible(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = [] if title is None else [visible(title)]
    for n, r in enumerate(cells):
        lines.append(" | ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if n == 0:
            lines.append("-+-".join("-" * w for w in widths))
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def print_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    write_csv(sys.stdout, columns, rows)


def write_csv(out: IO[str], columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    w = csv.writer(out)
    w.writerow([visible(c) for c in columns])
    w.writerows([visible(v) if isinstance(v, str) else v for v in row] for row in rows)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


def truth(option: str, value: str | None) -> bool | None:
    """A true/false option value as Determined's CLI reads them (strtobool's words)."""
    if value is None:
        return None
    word = value.strip().lower()
    if word in ("y", "yes", "t", "true", "on", "1"):
        return True
    if word in ("n", "no", "f", "false", "off", "0"):
        return False
    raise typer.BadParameter(f"{option} takes true or false, not {value!r}")
