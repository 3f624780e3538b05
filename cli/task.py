"""`hpcdet cmd`, `notebook`, `shell` and `task`: Determined's interactive tasks, each a batch
job with a trial's resources, environment, image and startup hook (``hpcdet.config.task``)."""

import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional, TypeVar

import typer

from hpcdet.cli.common import console, open_reads, paths, print_json, table, visible, when
from hpcdet.cli.follow import follow_trial
from hpcdet.errors import StateError, UsageError
from hpcdet.link import connect
from hpcdet.protocol.messages import Kill

if TYPE_CHECKING:
    from hpcdet.views.tasks import TaskRow

ConfigFile = Annotated[Optional[Path], typer.Option(
    "--config-file", help="The task's config (Determined's job config YAML).")]
Config = Annotated[Optional[list[str]], typer.Option(
    "--config", help="Override a config field: key=value (dotted keys), e.g. resources.slots=0.")]
Context = Annotated[Optional[Path], typer.Option(
    "--context", help="A directory copied to the job, where the task starts (as a trial's).")]
Includes = Annotated[Optional[list[Path]], typer.Option(
    "--include", "-i", help="A file or directory to add at the context's top (repeat).")]
Detach = Annotated[bool, typer.Option(
    "--detach", "-d", help="Return once it is created, without waiting for it.")]
JsonOut = Annotated[bool, typer.Option("--json", help="Print JSON.")]
TaskId = Annotated[int, typer.Argument(help="The task's id.", show_default=False)]
Timeout = Annotated[float, typer.Option(
    "--timeout", help="Seconds to wait for the job to start (0: as long as it takes).")]

T = TypeVar("T")

cmd_app = typer.Typer(no_args_is_help=True)
notebook_app = typer.Typer(no_args_is_help=True)
shell_app = typer.Typer(no_args_is_help=True)
task_app = typer.Typer(no_args_is_help=True)


def _start(kind: str, config_file: Optional[Path], config: Optional[list[str]],
           context: Optional[Path], includes: Optional[list[Path]],
           command: tuple[str, ...] = ()) -> tuple[int, int]:
    """Create the task; (its id, its trial's id)."""
    from hpcdet.cli.experiment import _convert, _warn
    from hpcdet.config.task import load_task_config

    task = load_task_config(kind, config_file, config or [], command)
    if kind == "shell" and task.experiment.environment.has_image:
        raise UsageError("environment.image: a shell joins its allocation on the host, and "
                         "cannot yet enter a container there; leave the image out (the shell "
                         "then runs in your own environment)")
    if context is not None and not context.is_dir():
        raise UsageError(f"--context {context}: not a directory")
    with _empty_context(context) as where:
        created = connect(paths()).create(
            task.experiment.raw, where, warn=_warn, includes=includes or [],
            convert_image=task.experiment.environment.has_image, task=kind)
    for line in created.warning.splitlines():
        console.print(f"Warning: {line}")
    if created.image:
        from hpcdet.containers import ContainerSpec

        _convert(ContainerSpec.from_dict(created.image), created.image_reserved)
    return created.experiment_id, created.trial_ids[0]


@contextmanager
def _empty_context(given: Optional[Path]) -> Iterator[Path]:
    """The context given, or an empty directory for the task's time at the daemon."""
    if given is not None:
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="hpcdet-task-") as made:
        yield Path(made)


def _wait(what: str, task_id: int, ready: Callable[[], Optional[T]], timeout: float) -> T:
    """``ready()``'s first answer that is not None, saying while the job waits."""
    deadline = time.monotonic() + timeout if timeout else None
    said = False
    while True:
        found = ready()
        if found is not None:
            return found
        if not said:
            console.print(f"Waiting for {what} {task_id} to start (`hpcdet job list` shows "
                          "its job; Ctrl-C stops waiting, not the task)...")
            said = True
        if deadline is not None and time.monotonic() > deadline:
            raise StateError(f"{what} {task_id} has not started in {timeout:g} s; it goes on "
                             f"waiting (`hpcdet {_GROUP[what]} kill {task_id}` ends it)")
        time.sleep(1.0)


_GROUP = {"command": "cmd", "notebook": "notebook", "shell": "shell"}


def _rows(kind: Optional[str]) -> list["TaskRow"]:
    from hpcdet.views.tasks import task_rows

    with open_reads(paths()) as reads:
        return task_rows(reads, kind)


def _list(kind: Optional[str], as_json: bool) -> None:
    rows = _rows(kind)
    if as_json:
        print_json([r.to_dict() for r in rows])
        return
    table(["ID", "Kind", "State", "Description", "Job", "Walltime", "Exit", "Started", "Ended"],
          [[r.id, r.kind, r.task.state, visible(r.task.description), r.job_id,
            r.walltime or "default", "" if r.exit_code is None else r.exit_code,
            when(r.task.created), when(r.task.ended)] for r in rows])


def _kill(kind: str, task_id: int) -> None:
    from hpcdet.views.tasks import task_row

    with open_reads(paths()) as reads:
        task_row(reads, task_id, kind)
    console.print(connect(paths()).send(Kill(task_id)).replace("experiment", kind))


def _logs(kind: str, task_id: int, follow: bool) -> None:
    from hpcdet.cli.follow import show_logs
    from hpcdet.views.tasks import task_row

    with open_reads(paths()) as reads:
        row = task_row(reads, task_id, kind)
    if row.trial is None:
        raise StateError(f"{kind} {task_id} has no job yet")
    raise typer.Exit(show_logs(row.trial.id, follow, None, None, None, None, False))


# ----------------------------------------------------------------------------------- commands


@cmd_app.command("run", context_settings={"allow_interspersed_args": False})
def cmd_run(
    command: Annotated[list[str], typer.Argument(
        help="The command: one argument runs with sh -c ('python3 prep.py && ls'), several as"
             " they are.", show_default=False)],
    config_file: ConfigFile = None, config: Config = None, context: Context = None,
    includes: Includes = None, detach: Detach = False,
) -> None:
    """Run a command in a batch job, with a trial's environment; print its output until it
    ends, and exit with its exit code."""
    task_id, trial_id = _start("command", config_file, config, context, includes,
                               tuple(command))
    console.print(f"Launched command {task_id} (`hpcdet cmd logs {task_id} -f` follows it)")
    if detach:
        return
    code = follow_trial(paths(), trial_id, announce=False)
    with open_reads(paths()) as reads:
        from hpcdet.views.tasks import task_row

        row = task_row(reads, task_id, "command")
    raise typer.Exit(row.exit_code if row.exit_code is not None else code)


@cmd_app.command("list")
def cmd_list(as_json: JsonOut = False) -> None:
    """The commands."""
    _list("command", as_json)


@cmd_app.command("logs")
def cmd_logs(task_id: TaskId, follow: Annotated[bool, typer.Option("--follow", "-f")] = False
             ) -> None:
    """A command's output."""
    _logs("command", task_id, follow)


@cmd_app.command("kill")
def cmd_kill(task_id: TaskId) -> None:
    """End a command and its job."""
    _kill("command", task_id)


# ---------------------------------------------------------------------------------- notebooks


def _notebook_url(task_id: int, timeout: float) -> str:
    from hpcdet.views.tasks import Service, notebook_service

    def ready() -> Optional[Service]:
        with open_reads(paths()) as reads:
            return notebook_service(paths(), reads, task_id)

    return f"{_wait('notebook', task_id, ready, timeout).base_url}lab"


def _say_url(task_id: int, path: str) -> None:
    console.print(f"Notebook {task_id} is running. Open it through the web UI's door: run "
                  "`hpcdet ui` here (on a laptop, `hpcdet ui -c CLUSTER`), open the address it "
                  f"prints, then {path} on it (its Tasks page links it too).", soft_wrap=True)


@notebook_app.command("start")
def notebook_start(
    config_file: ConfigFile = None, config: Config = None, context: Context = None,
    includes: Includes = None, detach: Detach = False, timeout: Timeout = 0,
) -> None:
    """Start JupyterLab in a batch job, in the trials' environment (JupyterLab must be
    installed there), and print where to open it once it runs."""
    task_id, _ = _start("notebook", config_file, config, context, includes)
    console.print(f"Launched notebook {task_id}")
    if detach:
        console.print(f"  `hpcdet notebook open {task_id}` prints where it is once it runs")
        return
    _say_url(task_id, _notebook_url(task_id, timeout))


@notebook_app.command("open")
def notebook_open(task_id: TaskId, timeout: Timeout = 0) -> None:
    """Print where a notebook is, once it runs."""
    _say_url(task_id, _notebook_url(task_id, timeout))


@notebook_app.command("list")
def notebook_list(as_json: JsonOut = False) -> None:
    """The notebooks."""
    _list("notebook", as_json)


@notebook_app.command("logs")
def notebook_logs(task_id: TaskId,
                  follow: Annotated[bool, typer.Option("--follow", "-f")] = False) -> None:
    """A notebook's JupyterLab output."""
    _logs("notebook", task_id, follow)


@notebook_app.command("kill")
def notebook_kill(task_id: TaskId) -> None:
    """End a notebook and free its allocation."""
    _kill("notebook", task_id)


# ------------------------------------------------------------------------------------- shells


def _join(job_id: str, argv: list[str]) -> None:
    """Run ``argv`` with this terminal inside job ``job_id``'s allocation (it replaces this
    process)."""
    from hpcdet.views.cluster import site_scheduler

    scheduler = site_scheduler(paths())
    command = scheduler.join_command(job_id, argv)
    if command is None:
        raise UsageError(scheduler.join_refused())
    sys.stdout.flush()
    try:
        os.execvp(command[0], command)
    except OSError as e:
        raise StateError(f"cannot run {shlex.join(command)}: {e.strerror}") from None


def _open_shell(task_id: int, timeout: float) -> None:
    from hpcdet.views.tasks import ShellTarget, shell_target

    def ready() -> Optional[ShellTarget]:
        with open_reads(paths()) as reads:
            return shell_target(paths(), reads, task_id)

    found = _wait("shell", task_id, ready, timeout)
    _join(found.job_id, ["bash", "--rcfile", found.rc_file, "-i"])


@shell_app.command("start")
def shell_start(
    config_file: ConfigFile = None, config: Config = None, context: Context = None,
    includes: Includes = None, detach: Detach = False, timeout: Timeout = 0,
) -> None:
    """Hold an allocation with a trial's resources and environment, and open a shell in it
    (`shell open ID` opens more; the allocation stays until `shell kill` or its walltime)."""
    task_id, _ = _start("shell", config_file, config, context, includes)
    console.print(f"Launched shell {task_id}")
    if not detach:
        _open_shell(task_id, timeout)


@shell_app.command("open")
def shell_open(task_id: TaskId, timeout: Timeout = 0) -> None:
    """A shell inside a shell task's allocation, with its environment."""
    _open_shell(task_id, timeout)


@shell_app.command("list")
def shell_list(as_json: JsonOut = False) -> None:
    """The shells."""
    _list("shell", as_json)


@shell_app.command("kill")
def shell_kill(task_id: TaskId) -> None:
    """End a shell task and free its allocation."""
    _kill("shell", task_id)


def trial_shell(trial_id: Annotated[int, typer.Argument(help="A running trial's id.")]) -> None:
    """A shell inside a running trial's allocation, beside the trial, for debugging."""
    from hpcdet.cli.common import read_store
    from hpcdet.views import lookups
    from hpcdet.views.tasks import trial_job

    trial = lookups.trial(read_store(paths()), trial_id)
    with open_reads(paths()) as reads:
        job_id = trial_job(reads, trial)
    _join(job_id, ["bash", "-i"])


# -------------------------------------------------------------------------------------- tasks


@task_app.command("list")
def task_list(as_json: JsonOut = False) -> None:
    """Every command, notebook and shell, as `det task list`."""
    _list(None, as_json)
