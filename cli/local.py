"""`hpcdet local-run` and `hpcdet shim-path`: a Determined script on this machine, off the
cluster, in the user's own environment."""

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from hpcdet.cli.common import paths

# The user's command keeps every word after its first, `-h` and `-c` included.
COMMAND_SETTINGS = {"allow_interspersed_args": False, "ignore_unknown_options": True,
                    "help_option_names": ["-h", "--help"]}


def _tree() -> Path:
    from hpcdet import trialside

    return trialside.ensure(paths().trialside)


def local_run(
    command: Annotated[list[str], typer.Argument(
        metavar="COMMAND...",
        help="The command to run, after `--`: e.g. `-- python3 train.py --epochs 1`.")],
) -> None:
    """Run a Determined script here, off the cluster, in your own environment.

    As Determined runs it without a master: `import determined` gives hpcdet's Core API,
    whose core.init() logs metrics, stores checkpoints under
    ~/.local/share/hpcdet/checkpoints ($XDG_DATA_HOME), is one rank of one, and whose
    searcher yields one operation of length 1. Your environment is kept; hpcdet's trial side
    goes first on PYTHONPATH."""
    from hpcdet.trialside import off_cluster_environment

    env = off_cluster_environment(_tree(), os.environ)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command[0], command, env)
    except OSError as e:
        print(f"Error: cannot run {command[0]!r}: {e.strerror or e}", file=sys.stderr)
        raise typer.Exit(127 if isinstance(e, FileNotFoundError) else 126) from None


def shim_path() -> None:
    """Print the directory that makes `import determined` give hpcdet's Core API.

    As in `PYTHONPATH="$(hpcdet shim-path)${PYTHONPATH:+:$PYTHONPATH}" python3 train.py`;
    not exported where `hpcdet` itself runs, whose own package it would hide. An upgrade of
    hpcdet makes a new one."""
    print(_tree())
