"""The `hpcdet` command. Commands are thin: parse, call the library, print."""

from __future__ import annotations

import sys

import typer

from hpcdet.cli import checkpoint, cluster, daemon, experiment, job, trial
from hpcdet.cli.common import visible
from hpcdet.config.cluster import load_cluster_config
from hpcdet.errors import HpcdetError
from hpcdet.private import apply_umask

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False,
                  help="Determined-style experiments on Slurm, PBS or this machine.")
app.add_typer(experiment.app, name="experiment", help="Create and manage experiments.")
app.add_typer(experiment.app, name="e", hidden=True)
app.add_typer(trial.app, name="trial", help="Trial logs and metrics.")
app.add_typer(trial.app, name="t", hidden=True)
app.add_typer(checkpoint.app, name="checkpoint", help="Checkpoints.")
app.add_typer(job.app, name="job", help="The job queue: order and priorities.")
app.add_typer(daemon.app, name="daemon", help="The per-user daemon.")
app.add_typer(cluster.app, name="cluster", help="Cluster settings and what the scheduler says.")


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
