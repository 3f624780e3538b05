"""The `hpcdet` command. Commands are thin: parse, call the library, print."""

from __future__ import annotations

import sys

import typer

from hpcdet.cli import checkpoint, cluster, daemon, experiment, trial
from hpcdet.errors import HpcdetError

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="Determined-style experiments on Slurm, PBS or this machine.")
app.add_typer(experiment.app, name="experiment", help="Create and manage experiments.")
app.add_typer(experiment.app, name="e", hidden=True)
app.add_typer(trial.app, name="trial", help="Trial logs and metrics.")
app.add_typer(trial.app, name="t", hidden=True)
app.add_typer(checkpoint.app, name="checkpoint", help="Checkpoints.")
app.add_typer(daemon.app, name="daemon", help="The per-user daemon.")
app.add_typer(cluster.app, name="cluster", help="Cluster settings and what the scheduler says.")


def main() -> None:
    try:
        app(standalone_mode=False)
    except HpcdetError as e:
        print(f"Error: {e}", file=sys.stderr)
        sys.exit(1)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        sys.exit(1)
    except Exception as e:  # click's usage errors
        import click

        if isinstance(e, click.ClickException):
            e.show()
            sys.exit(e.exit_code)
        raise


if __name__ == "__main__":
    main()
