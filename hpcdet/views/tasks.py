"""Interactive tasks (commands, notebooks, shells) as `task list`, `cmd list`, `notebook list`
and the web UI show them, where a notebook listens (the door's proxy asks), and where a
shell joins an allocation."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcdet.errors import NotFoundError, StateError, UsageError
from hpcdet.paths import StatePaths
from hpcdet.records import ExperimentRecord, RunRecord, TrialRecord
from hpcdet.rundir.layout import service, shell_rc
from hpcdet.states import RunState
from hpcdet.store.reads import Reads, reading

if TYPE_CHECKING:
    from hpcdet.store.queries import Queries


@dataclass(frozen=True)
class TaskRow:
    task: ExperimentRecord
    trial: TrialRecord | None
    run: RunRecord | None  # its latest

    @property
    def id(self) -> int:
        return self.task.id

    @property
    def kind(self) -> str:
        return self.task.task

    @property
    def job_id(self) -> str:
        return self.run.job_id if self.run is not None else ""

    @property
    def walltime(self) -> str:
        """Its job's time limit as its config asks (slurm.walltime or pbs.walltime); "" for
        the cluster config's, or the partition's own."""
        section = "pbs" if self.task.backend == "pbs" else "slurm"
        return str(self.task.stored_config.get(section, {}).get("walltime") or "")

    @property
    def exit_code(self) -> int | None:
        return self.run.exit_code if self.run is not None else None

    def to_dict(self) -> dict[str, Any]:
        e = self.task
        return {"id": e.id, "kind": e.task, "description": e.description, "state": e.state,
                "job_id": self.job_id, "exit_code": self.exit_code, "walltime": self.walltime,
                "resource_pool": e.resource_pool, "started": e.created, "ended": e.ended,
                "error": e.error or (self.trial.end_reason if self.trial else "")}


def _row(reads: Reads, task: ExperimentRecord) -> TaskRow:
    trials = reads.trials(task.id)
    trial = trials[0] if trials else None
    runs = [r for r in reads.experiment_runs(task.id) if trial and r.trial_id == trial.id]
    return TaskRow(task, trial, runs[-1] if runs else None)


def task_rows(source: Reads | Queries, kind: str | None = None) -> list[TaskRow]:
    """The tasks (of ``kind``, or all), by id."""
    with reading(source) as reads:
        return [_row(reads, t) for t in reads.experiments(tasks=True)
                if kind is None or t.task == kind]


def task_row(reads: Reads, task_id: int, kind: str | None = None) -> TaskRow:
    """One task; ``kind``: it must be one of those.

    Raises:
        NotFoundError: no such task (an experiment's id names none).
    """
    with reads.snapshot():
        try:
            task = reads.experiment(task_id)
        except NotFoundError:
            task = None
        if task is None or not task.task or (kind is not None and task.task != kind):
            what = kind or "task"
            raise NotFoundError(f"there is no {what} {task_id}; `hpcdet {_LIST[kind]}` lists "
                                "them")
        return _row(reads, task)


_LIST = {None: "task list", "command": "cmd list", "notebook": "notebook list",
         "shell": "shell list"}


def _live_run_dir(paths: StatePaths, reads: Reads, task_id: int, kind: str
                  ) -> tuple[TaskRow, Path | None]:
    """The task, and its job's run directory, or None before it is submitted (whether it runs
    yet, its files say: the scheduler's word comes at the next poll).

    Raises:
        NotFoundError: no such task of that kind.
        StateError: it has ended.
    """
    row = task_row(reads, task_id, kind)
    if row.task.ended is not None:
        raise StateError(f"{kind} {task_id} has ended ({row.task.state}); start another "
                         f"with `hpcdet {kind} start`")
    run, trial = row.run, row.trial
    if run is None or trial is None or run.ended is not None:
        return row, None
    return row, paths.run(row.id, trial.id, run.run_id)


@dataclass(frozen=True)
class Service:
    """Where a notebook's JupyterLab listens, and its token."""

    host: str
    port: int
    token: str
    base_url: str


def notebook_service(paths: StatePaths, reads: Reads, task_id: int) -> Service | None:
    """Where notebook ``task_id`` listens; None while its job waits or JupyterLab starts.

    Raises:
        NotFoundError: no such notebook.
        StateError: it has ended.
    """
    _, run_dir = _live_run_dir(paths, reads, task_id, "notebook")
    if run_dir is None:
        return None
    try:
        found = json.loads(service(run_dir).read_text())
        return Service(str(found["host"]), int(found["port"]), str(found["token"]),
                       str(found["base_url"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not written yet


def notebook_locator(paths: StatePaths) -> Callable[[int], tuple[str, int, str] | None]:
    """For the door's proxy: where notebook ``task_id`` listens, and its token."""
    from hpcdet.views.access import open_reads

    def locate(task_id: int) -> tuple[str, int, str] | None:
        with open_reads(paths) as reads:
            found = notebook_service(paths, reads, task_id)
        return None if found is None else (found.host, found.port, found.token)

    return locate


@dataclass(frozen=True)
class ShellTarget:
    """What `shell open` joins: the task's job, and its environment as bash sources it."""

    job_id: str
    rc_file: str


def shell_target(paths: StatePaths, reads: Reads, task_id: int) -> ShellTarget | None:
    """None while the shell's job waits or has not written its environment yet.

    Raises:
        NotFoundError: no such shell.
        StateError: it has ended.
    """
    row, run_dir = _live_run_dir(paths, reads, task_id, "shell")
    if run_dir is None or not shell_rc(run_dir).exists():
        return None
    return ShellTarget(row.job_id, str(shell_rc(run_dir)))


def trial_job(reads: Reads, trial: TrialRecord) -> str:
    """The job of a running trial's latest run, for `trial shell`.

    Raises:
        UsageError: the trial is not running.
    """
    runs = [r for r in reads.experiment_runs(trial.experiment_id) if r.trial_id == trial.id]
    if not runs or runs[-1].state != RunState.RUNNING:
        state = runs[-1].state if runs else "not submitted"
        raise UsageError(f"trial {trial.id} is not running (its latest run is {state}); a "
                         "shell joins a running trial's allocation")
    return runs[-1].job_id
