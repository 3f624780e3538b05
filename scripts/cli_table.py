"""docs/cli.md: every `det` command and option of the daily groups, beside hpcdet's.

Determined's side is docs/det-cli-0.38.1.txt (written from det's own parser by
scripts/det_cli_snapshot.py); hpcdet's is read from its CLI here, so the table cannot drift:
tests/unit/cli/test_cli_table.py fails when docs/cli.md is not what this writes, or when a
det command or option has neither an hpcdet equivalent nor a reason below.

    python scripts/cli_table.py > docs/cli.md
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from hpcdet.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "docs" / "det-cli-0.38.1.txt"

_MASTER = "there is no master: the batch system and the user's own daemon stand in for it"
# Why hpcdet has no equivalent: a det command ("experiment move") or one of its options
# ("trial logs --agent-id").
WHY_NOT = {
    "experiment delete-tb-files": "TensorBoard files stay where the trial writes them",
    "experiment download-model-def": "the context is the directory you created it from; "
    "hpcdet keeps a copy in the run tree",
    "experiment move": "there are no workspaces or projects",
    "experiment set log-retention": "logs live in the run tree until the experiment is deleted",
    "trial set log-retention": "logs live in the run tree until the experiment is deleted",
    "trial support-bundle": _MASTER,
    "checkpoint rm": "not yet: delete whole checkpoints with checkpoint delete",
    "experiment create --local": "deprecated in det 0.38; every backend here is the user's",
    "experiment create --project_id": "there are no workspaces or projects",
    "experiment create --publish": "hpcdet proxies no ports to trials",
    "experiment create -p": "hpcdet proxies no ports to trials (det's --publish)",
    "experiment create --template": "there are no templates",
    "experiment continue --config-file": "not yet: --config key=value overrides",
    "experiment list --pages": "all results come at once (--limit, --offset)",
    "experiment list --show_project": "there are no workspaces or projects",
    "experiment list-trials --pages": "all trials come at once",
    "trial describe --limit": "all of a trial comes at once",
    "trial describe --offset": "all of a trial comes at once",
    "trial describe --pages": "all of a trial comes at once",
    "trial describe --metrics-summary": "not yet: --metrics",
    "job list --pages": "all jobs come at once (--limit, --offset)",
    "job list --table": "the table is the default",
}
for _group in ("experiment logs", "trial logs"):
    WHY_NOT.update({
        f"{_group} --agent-id": "not yet: --rank-id",
        f"{_group} --container-id": "not yet: --rank-id",
        f"{_group} --source": "one source: the trial's output",
        f"{_group} --stdtype": "stdout and stderr are one stream here",
    })


def det_commands() -> list[tuple[str, list[str], list[str]]]:
    """(command, aliases, options) of det, from the snapshot."""
    rows = []
    for line in SNAPSHOT.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, opts = line.partition(":")
        name, _, alias = head.partition(" (")
        rows.append((name.strip(), alias.rstrip(")").split(", ") if alias else [],
                     opts.split()))
    return rows


def hpcdet_commands() -> dict[str, tuple[list[str], set[str]]]:
    """command path -> (its aliases, its options), from hpcdet's CLI."""
    found: dict[str, tuple[list[str], set[str]]] = {}

    def walk(group: Any, path: list[str]) -> None:
        def key(cmd: Any) -> int:  # an alias runs the same function
            return id(getattr(cmd.callback, "__wrapped__", cmd.callback) or cmd)

        names: dict[int, list[str]] = {}
        for name, cmd in group.commands.items():
            names.setdefault(key(cmd), []).append(name)
        for name, cmd in group.commands.items():
            if cmd.hidden:
                continue
            aliases = [n for n in names[key(cmd)] if n != name]
            if hasattr(cmd, "commands"):  # a group (typer keeps a click of its own)
                walk(cmd, [*path, name])
                continue
            opts = {o for p in cmd.params if p.param_type_name == "option"
                    and not getattr(p, "hidden", False)
                    for o in (*p.opts, *p.secondary_opts)} - {"-h", "--help"}
            found[" ".join([*path, name])] = (aliases, opts)

    walk(typer.main.get_command(app), [])
    return found


def table() -> tuple[str, list[str]]:
    """The markdown, and what det has that hpcdet neither has nor says why."""
    ours = hpcdet_commands()
    unexplained: list[str] = []
    lines = [
        "# `det` and `hpcdet`",
        "",
        "Every command and option of Determined 0.38.1's daily groups (experiment, trial,",
        "checkpoint, job), beside hpcdet's. Written by `scripts/cli_table.py` from det's own",
        "parser (`docs/det-cli-0.38.1.txt`) and hpcdet's CLI; a test keeps it current.",
        "Global: `hpcdet -h`, `-v`/`--version` and `version` as det's; the aliases `e`, `t`,",
        "`c`, `j` and `ls`, `lt`, `lc`, `u` as det's. hpcdet adds `hpcdet submit`,",
        "`daemon`, `cluster`, `trial metrics`, `checkpoint list` and `continue` commands.",
        "",
        "| det command | det options | hpcdet | options hpcdet lacks, and why |",
        "|---|---|---|---|",
    ]
    for name, aliases, opts in det_commands():
        det_cell = name + (f" ({', '.join(aliases)})" if aliases else "")
        if name not in ours:
            why = WHY_NOT.get(name)
            if why is None:
                unexplained.append(name)
            lines.append(f"| `{det_cell}` | {_opts(opts)} | — | {why or '**missing**'} |")
            continue
        our_aliases, our_opts = ours[name]
        unexplained += [f"{name} (alias {a})" for a in aliases if a not in our_aliases]
        lacking = []
        for opt in opts:
            if opt in our_opts:
                continue
            why = WHY_NOT.get(f"{name} {opt}")
            if why is None:
                unexplained.append(f"{name} {opt}")
            lacking.append(f"`{opt}`: {why or '**missing**'}")
        extra = sorted(our_opts - set(opts))
        ours_cell = "yes" + (f"; also {_opts(extra)}" if extra else "")
        lines.append(f"| `{det_cell}` | {_opts(opts)} | {ours_cell} | {'; '.join(lacking)} |")
    return "\n".join(lines) + "\n", unexplained


def _opts(opts: list[str]) -> str:
    return " ".join(f"`{o}`" for o in opts)


def main() -> int:
    text, unexplained = table()
    sys.stdout.write(text)
    for item in unexplained:
        print(f"no hpcdet equivalent and no reason given: {item}", file=sys.stderr)
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
