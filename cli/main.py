"""The `hpcdet` command. Commands are thin: parse, call the library, print."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from hpcdet import DETERMINED_API, __version__
from hpcdet.cli import checkpoint, cluster, daemon, experiment, job, trial, ui
from hpcdet.cli.common import visible
from hpcdet.config.cluster import load_cluster_config
from hpcdet.errors import HpcdetError
from hpcdet.private import apply_umask

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Determined-style experiments on Slurm, PBS or this machine.")
# Determined's one-letter aliases, hidden from the help as det hides them.
for group, name, alias, about in (
    (experiment.app, "experiment", "e", "Create and manage experiments."),
    (trial.app, "trial", "t", "Trials: describe, logs, metrics, download, kill."),
    (checkpoint.app, "checkpoint", "c", "Checkpoints: list, describe, download, delete."),
    (job.app, "job", "j", "The job queue: order and priorities."),
):
    app.add_typer(group, name=name, help=about)
    app.add_typer(group, name=alias, hidden=True, help=about)
app.command("submit")(experiment.submit)
app.command("ui")(ui.ui)
app.command("tensorboard")(ui.tensorboard)
app.add_typer(daemon.app, name="daemon", help="The per-user daemon.")
app.add_typer(cluster.app, name="cluster", help="Cluster settings and what the scheduler says.")


def _version_line() -> str:
    return f"hpcdet {__version__} (Determined {DETERMINED_API} API)"


def _print_version(value: bool) -> None:
    if value:
        print(_version_line())
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[bool, typer.Option(
        "--version", "-v", callback=_print_version, is_eager=True,
        help="Print hpcdet's version and exit.")] = False,
) -> None:
    """Determined-style experiments on Slurm, PBS or this machine."""


@app.command()
def version() -> None:
    """hpcdet's version, and the Determined release whose API and CLI it follows."""
    print(_version_line())


def _private_umask() -> None:
    """Whatever the CLI writes (requests, a started daemon and all it starts) is private
    whatever the login shell's umask; a broken cluster file is reported by the command."""
    try:
        share = load_cluster_config().share_with_group
    except HpcdetError:
        share = False
    apply_umask(share)


def main() -> None:
    _private_umask()
    try:
        app()  # standalone: typer prints usage errors and exits with their code
    except HpcdetError as e:
        print(f"Error: {visible(e, keep_lines=True)}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
