"""Writes docs/det-cli-0.38.1.txt: the commands and options of Determined's own `det` CLI that
hpcdet's table (scripts/cli_table.py) compares against. Run it with a Python that has
`pip install determined==0.38.1` (a throwaway venv: Determined is not one of hpcdet's
dependencies); the file it writes is committed, so the table needs no Determined to check.

    python scripts/det_cli_snapshot.py > docs/det-cli-0.38.1.txt
"""

from __future__ import annotations

import argparse

# The groups a researcher uses every day; the rest of det (agents, users, workspaces,
# notebooks, models, templates...) administers a master hpcdet does not have.
GROUPS = ("experiment", "trial", "checkpoint", "job")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _walk(parser: argparse.ArgumentParser, path: list[str]) -> list[str]:
    lines = []
    children = _subparsers(parser)
    seen: set[int] = set()
    for name, child in children.items():
        if id(child) in seen or name == "help":
            continue  # an alias is the same parser
        seen.add(id(child))
        aliases = [n for n, c in children.items() if c is child and n != name]
        sub = _subparsers(child)
        if sub:
            lines += _walk(child, [*path, name])
            continue
        options = sorted(
            opt for action in child._actions if action.option_strings
            for opt in action.option_strings if opt not in ("-h", "--help"))
        alias = f" ({', '.join(aliases)})" if aliases else ""
        lines.append(f"{' '.join([*path, name])}{alias}: {' '.join(options)}".rstrip())
    return lines


def main() -> None:
    from determined import __version__, cli
    from determined.cli import cli as det_cli

    parser = det_cli.make_parser()
    cli.add_args(parser, det_cli.all_args_description)
    top = _subparsers(parser)
    print(f"# det {__version__}: command (aliases): options")
    for group in GROUPS:
        for line in _walk(top[group], [group]):
            print(line)


if __name__ == "__main__":
    main()
