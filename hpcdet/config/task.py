"""Interactive tasks' configs: Determined's job config for `cmd run`, `notebook start` and
`shell start`, checked as an experiment's is and turned into the config of a one-trial
experiment that the daemon runs like any other (``task_config``).

A task keeps the experiment machinery (resources, environment, image, bind mounts, startup
hook, context, queue, logs, kill) and differs only in what its one trial runs: the user's
command, JupyterLab (``hpcdet.launch.notebook``) or a holder of the allocation that a shell
joins (``hpcdet.launch.hold``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcdet.config.experiment import ExperimentConfig
from hpcdet.config.hpc import check_pbs, check_slurm
from hpcdet.config.schema import (
    At,
    Bool,
    Custom,
    Int,
    Problems,
    Spec,
    Str,
    check_mapping,
    is_int,
    show,
)
from hpcdet.config.sections import check_bind_mounts, check_environment
from hpcdet.config.source import apply_overrides, parse_yaml, read_config_file
from hpcdet.errors import ConfigError

COMMAND, NOTEBOOK, SHELL = "command", "notebook", "shell"
TASK_KINDS = (COMMAND, NOTEBOOK, SHELL)

# Determined's notebook idle types: what counts as the notebook being in use.
IDLE_TYPES = ("kernels_or_terminals", "kernel_connections_or_terminals", "activity")

_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def _duration(value: Any, at: At) -> int | None:
    """Seconds, from a number of seconds or Determined's form ("30m", "1h30m", "90s")."""
    if value is None:
        return None
    if is_int(value) and value > 0:
        return int(value)
    match = _DURATION.fullmatch(value) if isinstance(value, str) and value else None
    if match is None or not any(match.groups()):
        at.error(f"must be a duration such as 30m, 1h30m or 90s (or seconds), got {show(value)}")
        return None
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        at.error("must be longer than 0 s")
        return None
    return total


_RESOURCES: dict[str, Spec] = {
    "slots": Int(1, minimum=0),
    "resource_pool": Str(""),
    "priority": Int(None, minimum=1, maximum=99),
    "weight": Custom(lambda v, at: 1 if v is None else v),
    "max_slots": Int(None, minimum=0),
    "shm_size": Custom(lambda v, at: v),
    "devices": Custom(lambda v, at: v or []),
    "agent_label": Str(""),
    "is_single_node": Bool(False),
}


def _resources(value: Any, at: At) -> dict[str, Any]:
    return check_mapping(value, at, _RESOURCES, removed={
        "slots_per_trial": "a task's resources are resources.slots (the GPUs, or CPU slots,"
                           " it gets); slots_per_trial is an experiment's"})


TASK_SPECS: dict[str, Spec] = {
    "description": Str(None),
    "environment": Custom(check_environment),
    "resources": Custom(_resources),
    "bind_mounts": Custom(check_bind_mounts),
    "work_dir": Str(None),
    "debug": Bool(False),
    "idle_timeout": Custom(_duration),
    "notebook_idle_type": Str(IDLE_TYPES[0], choices=IDLE_TYPES),
    # For `cmd run`, the command; the command line gives it (it wins), or the config file.
    "entrypoint": Custom(lambda v, at: v),
    "slurm": Custom(check_slurm),
    "pbs": Custom(check_pbs),
}


@dataclass(frozen=True)
class TaskConfig:
    """A task's config: ``experiment`` is what the daemon runs (one trial, no restarts),
    ``raw`` the task's own config with its defaults."""

    kind: str
    experiment: ExperimentConfig
    raw: dict[str, Any]

    @property
    def idle_timeout(self) -> int | None:
        value = self.raw["idle_timeout"]
        return None if value is None else int(value)


def load_task_config(kind: str, source: str | Path | None, overrides: Sequence[str] = (),
                     command: Sequence[str] = ()) -> TaskConfig:
    """The task config of ``source`` (a YAML file, or none for the defaults) with
    ``--config key=value`` overrides; ``command``: `cmd run`'s, which replaces any
    entrypoint of the file.

    Raises:
        ConfigError: every problem found, each with its path.
    """
    label = f"{kind} config {source}" if source is not None else f"{kind} config"
    text = "{}\n" if source is None else read_config_file(Path(source))
    parsed = parse_yaml(text)
    problems = Problems(origins=parsed.origins, items=parsed.problems)
    if not parsed.readable:
        raise ConfigError(problems.items, source=label)
    document = parsed.data if parsed.data is not None else {}
    if isinstance(document, dict):
        apply_overrides(document, overrides, parsed.origins, problems)
    at = At(problems)
    if not isinstance(document, dict):
        at.error(f"the config must be a mapping (resources: ..., environment: ...), got "
                 f"{show(document)}")
        document = {}
    raw = check_mapping(document, at, TASK_SPECS)
    if command:
        raw["entrypoint"] = command[0] if len(command) == 1 else list(command)
    _check_entrypoint(kind, raw, at / "entrypoint")
    if kind != NOTEBOOK:
        for key in ("idle_timeout", "notebook_idle_type"):
            if key in document:
                (at / key).error(f"applies to notebooks only; leave it out of a {kind}'s config")
    if problems:
        raise ConfigError(problems.items, source=label)
    try:
        experiment = ExperimentConfig.from_dict(experiment_form(kind, raw))
    except ConfigError as e:
        raise ConfigError(e.problems, source=label) from None
    return TaskConfig(kind, experiment, raw)


def _check_entrypoint(kind: str, raw: dict[str, Any], at: At) -> None:
    value = raw["entrypoint"]
    if kind != COMMAND:
        if value is not None:
            at.error(f"a {kind} runs no entrypoint of its own; leave it out")
    elif value is None:
        at.error("give the command to run: `hpcdet cmd run 'python3 prep.py'`")
    elif not (isinstance(value, str) and value.strip()) and not (
            isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
        at.error(f"must be a command string or a list of strings, got {show(value)}")


def _in_work_dir(work_dir: str | None, argv: list[str]) -> list[str]:
    """``argv`` run in ``work_dir`` (the context snapshot when None, where trials start)."""
    if work_dir is None:
        return argv
    return ["sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", work_dir, *argv]


def entrypoint(kind: str, raw: dict[str, Any]) -> list[str]:
    """What the task's trial runs, in the trial's own environment."""
    work_dir = raw["work_dir"]
    if kind == COMMAND:
        given = raw["entrypoint"]
        return _in_work_dir(work_dir, ["sh", "-c", given] if isinstance(given, str)
                            else list(given))
    if kind == NOTEBOOK:
        argv = ["python3", "-m", "hpcdet.launch.notebook",
                "--idle-type", raw["notebook_idle_type"]]
        if raw["idle_timeout"] is not None:
            argv += ["--idle-timeout", str(raw["idle_timeout"])]
        return _in_work_dir(work_dir, argv)
    return _in_work_dir(work_dir, ["python3", "-m", "hpcdet.launch.hold"])


def default_description(kind: str, raw: dict[str, Any]) -> str:
    given = raw["entrypoint"]
    if kind == COMMAND:
        return given if isinstance(given, str) else shlex.join(given)
    return kind


def experiment_form(kind: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The one-trial experiment config that runs the task."""
    resources = dict(raw["resources"])
    resources["slots_per_trial"] = resources.pop("slots")
    description = raw["description"] or default_description(kind, raw)
    return {
        "name": kind.capitalize() + (f" ({description})" if description != kind else ""),
        "description": description,
        "entrypoint": entrypoint(kind, raw),
        "searcher": {"name": "single", "metric": "none"},
        "max_restarts": 0,
        "resources": resources,
        "environment": raw["environment"],
        "bind_mounts": raw["bind_mounts"],
        "debug": raw["debug"],
        "slurm": raw["slurm"],
        "pbs": raw["pbs"],
    }
