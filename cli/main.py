"""The `hpcdet` command. Commands are thin: parse, call the library, print."""

# No `from __future__ import annotations` in the command modules: typer reads every command's
# signature to build the command tree at each start, and string annotations cost an eval each.
import copy
import sys
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from hpcdet import DETERMINED_API, __version__
from hpcdet.cli import (
    checkpoint,
    cluster,
    daemon,
    doctor,
    experiment,
    job,
    local,
    model,
    relay,
    task,
    trial,
    ui,
    webhook,
)
from hpcdet.cli.common import visible
from hpcdet.errors import HpcdetError
from hpcdet.private import apply_umask

# Determined's one-letter aliases, hidden from the help as det hides them.
_ALIASES = {"experiment": "e", "trial": "t", "checkpoint": "c", "job": "j"}


class _Commands(TyperGroup):
    """hpcdet's top-level group. An alias is a hidden copy of its group sharing the group's
    commands: typer would build all of them a second time, at every start."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        commands = {}
        for name, command in self.commands.items():
            commands[name] = command
            if name in _ALIASES:
                alias = copy.copy(command)
                alias.name, alias.hidden = _ALIASES[name], True
                commands[alias.name] = alias
        self.commands = commands


app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False,
                  context_settings={"help_option_names": ["-h", "--help"]}, cls=_Commands,
                  help="Determined-style experiments on Slurm, PBS or this machine.")
for group, name, about in (
    (experiment.app, "experiment", "Create and manage experiments."),
    (trial.app, "trial", "Trials: describe, logs, metrics, download, kill."),
    (checkpoint.app, "checkpoint", "Checkpoints: list, describe, download, delete."),
    (job.app, "job", "The job queue: order and priorities."),
    (model.app, "model", "The model registry: create, list, describe, register-version, "
     "download."),
    (task.cmd_app, "cmd", "Commands in batch jobs: run, list, logs, kill."),
    (task.notebook_app, "notebook", "JupyterLab in a batch job: start, open, list, logs, kill."),
    (task.shell_app, "shell", "Shells in an allocation: start, open, list, kill."),
    (task.task_app, "task", "Every interactive task: list."),
    (webhook.app, "webhook", "Webhooks: create, list, delete (experiment states, alerts)."),
):
    app.add_typer(group, name=name, help=about)
app.command("submit")(experiment.submit)
app.command("ui")(ui.ui)
app.command("tensorboard")(ui.tensorboard)
app.command("local-run", context_settings=local.COMMAND_SETTINGS)(local.local_run)
app.command("shim-path")(local.shim_path)
app.add_typer(relay.app, name="relay", hidden=True)
app.add_typer(daemon.app, name="daemon", help="The per-user daemon.")
app.add_typer(cluster.app, name="cluster", help="Cluster settings and what the scheduler says.")
app.command("doctor")(doctor.doctor)


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
    cluster: Annotated[Optional[str], typer.Option(
        "--cluster", "-c", metavar="NAME",
        help="Run the command on this cluster's login node (`hpcdet cluster add`; default: "
             "$HPCDET_CLUSTER, else the default cluster, else this machine; `local`: this "
             "machine).")] = None,
) -> None:
    """Determined-style experiments on Slurm, PBS or this machine."""


@app.command()
def version() -> None:
    """hpcdet's version, and the Determined release whose API and CLI it follows."""
    print(_version_line())


def _private_umask() -> None:
    """Whatever the CLI writes (requests, a started daemon and all it starts) is private
    whatever the login shell's umask; a broken cluster file is reported by the command."""
    from hpcdet.config.cluster_files import may_share_with_group

    share: bool | str = False
    if may_share_with_group():  # else loading the cluster config (and YAML) tells nothing
        from hpcdet.config.cluster import load_cluster_config

        try:
            share = load_cluster_config().share_with_group
        except HpcdetError:
            share = False
    apply_umask(share)


def _on_cluster(argv: list[str]) -> int | None:
    """The exit code of ``argv`` run on the chosen cluster's login node; None when it runs
    here (no cluster chosen, or a command of the laptop's own). ``argv`` loses its -c."""
    from hpcdet.cli.remote import run_on_cluster
    from hpcdet.remote.forward import runs_on_laptop, split_cluster
    from hpcdet.remote.profiles import chosen

    name, rest = split_cluster(argv)
    argv[:] = rest
    if runs_on_laptop(rest):
        return None
    cluster = chosen(name)
    if cluster is None:
        return None
    return int(run_on_cluster(cluster, rest))


def main() -> None:
    _private_umask()
    try:
        argv = sys.argv[1:]
        code = _on_cluster(argv)
        if code is not None:
            sys.exit(code)
        app(args=argv)  # standalone: typer prints usage errors and exits with their code
    except HpcdetError as e:
        print(f"Error: {visible(e, keep_lines=True)}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
