"""hpcdet's ``slurm:`` and ``pbs:`` sections, and the batch options hpcdet keeps for itself."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from hpcdet.config import directives
from hpcdet.config.schema import (
    At,
    Custom,
    Int,
    Spec,
    Str,
    Walltime,
    check_mapping,
    parse_walltime,
    show,
)

_SLOTS = "use resources.slots_per_trial (and slurm.slots_per_node to spread them over nodes)"
# Options hpcdet writes itself; a second value would fight the job array, log capture,
# preemption signal or resource request hpcdet builds, so each one says what to set instead.
SBATCH_OWNED: dict[str, str] = {
    "--array": "hpcdet submits all trials of a search as one job array; limit concurrency with"
    " searcher.max_concurrent_trials",
    "--job-name": "hpcdet names jobs after the experiment; set name",
    "--output": "hpcdet captures trial output in the run directory (hpcdet trial logs)",
    "--error": "hpcdet captures trial output in the run directory (hpcdet trial logs)",
    "--nodes": _SLOTS,
    "--ntasks": _SLOTS,
    "--gpus": _SLOTS + "; set slurm.gpu_type for a GPU model",
    "--signal": "hpcdet requests its own preemption signal; set preemption_timeout",
    "--parsable": "hpcdet adds the options it needs to read sbatch's reply",
    "--wrap": "hpcdet submits its own batch script; set entrypoint",
    "--chdir": "trials run in the experiment's context directory",
    "--time": "use slurm.walltime",
    "--partition": "use slurm.partition or resources.resource_pool",
}
# --ntasks* and --gpus* cover every variant (--ntasks-per-node, --gpus-per-task, ...).
_SBATCH_PREFIXES = ("--ntasks", "--gpus")
_SBATCH_SHORT = {
    "-a": "--array", "-J": "--job-name", "-o": "--output", "-e": "--error", "-N": "--nodes",
    "-n": "--ntasks", "-G": "--gpus", "-D": "--chdir", "-t": "--time", "-p": "--partition",
}
PBS_OWNED: dict[str, str] = {
    "-J": "hpcdet submits all trials of a search as one job array; limit concurrency with"
    " searcher.max_concurrent_trials",
    "-N": "hpcdet names jobs after the experiment; set name",
    "-o": "hpcdet captures trial output in the run directory (hpcdet trial logs)",
    "-e": "hpcdet captures trial output in the run directory (hpcdet trial logs)",
    "-j": "hpcdet captures trial output in the run directory (hpcdet trial logs)",
    "-q": "use pbs.queue or resources.resource_pool",
    "-A": "use pbs.account",
}
_PBS_RESOURCES = {
    "walltime": "use pbs.walltime",
    "select": "use resources.slots_per_trial (and pbs.slots_per_node to spread them over nodes)",
}


def _owned_sbatch(option: str) -> str | None:
    name = option.split("=", 1)[0]
    if not name.startswith("--"):
        name = _SBATCH_SHORT.get(name[:2], name)
    for prefix in _SBATCH_PREFIXES:
        if name.startswith(prefix):
            return prefix
    return name if name in SBATCH_OWNED else None


def _owned_pbs(tokens: list[str], i: int) -> tuple[str, str] | None:
    flag = tokens[i][:2]
    if flag in PBS_OWNED:
        return flag, PBS_OWNED[flag]
    if flag == "-l":
        spec = tokens[i][2:] or (tokens[i + 1] if i + 1 < len(tokens) else "")
        for item in spec.split(","):
            resource = item.split("=", 1)[0].strip()
            if resource in _PBS_RESOURCES:
                return f"-l {resource}", _PBS_RESOURCES[resource]
    return None


class Directive(Str):
    """A string that reaches a batch directive line, checked as ``directives.KINDS[kind]``."""

    def __init__(self, kind: str, default: str | None = None) -> None:
        super().__init__(default)
        self.kind = kind

    def validate(self, value: Any, at: At) -> Any:
        value = super().validate(value, at)
        if value is None or value == self.default:  # resources.resource_pool: "" is the default
            return value
        said = directives.problem(value, self.kind)
        if said is not None:
            at.error(f"{value!r} {said}")
            return self.default
        return value


# sbatch options whose value is a Slurm name, checked like the slurm section's own keys.
_SBATCH_VALUES = {"--account": "name", "--qos": "name", "--reservation": "names"}


def _sbatch_entry_problem(entry: str) -> str | None:
    said = directives.problem(entry, "sbatch_option")
    if said is not None:
        return f"{entry!r} {said}"
    option, _, value = entry.partition("=")
    kind = _SBATCH_VALUES.get(option)
    said = directives.problem(value, kind) if kind and value else None
    return None if said is None else f"the value of {option}, {value!r}, {said}"


def _off_its_line(entry: Any, at: At) -> bool:
    """Whether ``entry`` has a character that would end its directive line (recorded at ``at``)."""
    said = directives.problem(entry, "text") if isinstance(entry, str) else None
    if said is not None:
        at.error(f"{entry!r} {said}")
    return said is not None


def _split(entry: Any, at: At, example: str) -> list[str] | None:
    if not isinstance(entry, str):
        at.error(f"must be a string such as {example!r}, got {show(entry)}")
        return None
    try:
        tokens = shlex.split(entry)
    except ValueError as err:
        at.error(f"cannot be parsed ({err}); check the quotes in {entry!r}")
        return None
    if not tokens or not tokens[0].startswith("-"):
        at.error(f"must be an option starting with '-', such as {example!r}; got {entry!r}")
        return None
    return tokens


def check_sbatch_args(value: Any, at: At) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        at.error(f"must be a list of sbatch options, e.g. ['--mem=16G'], got {show(value)}")
        return []
    good: list[str] = []
    for i, entry in enumerate(value):
        tokens = None if _off_its_line(entry, at / i) else _split(entry, at / i, "--mem=16G")
        if tokens is None:
            continue
        owned = [o for o in map(_owned_sbatch, (t for t in tokens if t.startswith("-"))) if o]
        for name in owned:
            (at / i).error(f"{entry!r} sets {name}, which hpcdet sets itself; {SBATCH_OWNED[name]}")
        said = None if owned else _sbatch_entry_problem(entry)
        if said is not None:
            (at / i).error(said)
        elif not owned:
            good.append(entry)
    return good


def check_pbsbatch_args(value: Any, at: At) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        at.error(f"must be a list of qsub options, e.g. ['-l mem=16gb'], got {show(value)}")
        return []
    for i, entry in enumerate(value):
        if _off_its_line(entry, at / i):
            continue
        tokens = _split(entry, at / i, "-l mem=16gb") or []
        for j, token in enumerate(tokens):
            owned = _owned_pbs(tokens, j) if token.startswith("-") else None
            if owned is not None:
                (at / i).error(f"{entry!r} sets {owned[0]}, which hpcdet sets itself; {owned[1]}")
    return [e for e in value if isinstance(e, str)]


SLURM_SPECS: dict[str, Spec] = {
    "slots_per_node": Int(None, minimum=1),
    "gpu_type": Directive("name"),
    "sbatch_args": Custom(check_sbatch_args),
    "walltime": Walltime(None),
    "partition": Directive("names"),
    "account": Directive("name"),
    "qos": Directive("name"),
}
PBS_SPECS: dict[str, Spec] = {
    "slots_per_node": Int(None, minimum=1),
    "pbsbatch_args": Custom(check_pbsbatch_args),
    "walltime": Walltime(None),
    # They reach #PBS lines (pbs.j2), which the directive filter checks again.
    "queue": Directive("text"),
    "account": Directive("text"),
}


def check_slurm(value: Any, at: At) -> dict[str, Any]:
    return check_mapping(value, at, SLURM_SPECS)


def check_pbs(value: Any, at: At) -> dict[str, Any]:
    return check_mapping(value, at, PBS_SPECS)


def _seconds(walltime: Any) -> int | None:
    return None if walltime is None else parse_walltime(walltime)


@dataclass(frozen=True)
class SlurmConfig:
    slots_per_node: int | None = None
    gpu_type: str | None = None
    sbatch_args: list[str] = field(default_factory=list)
    walltime_seconds: int | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> SlurmConfig:
        fields = {k: v for k, v in raw.items() if k != "walltime"}
        return cls(**fields, walltime_seconds=_seconds(raw["walltime"]))


@dataclass(frozen=True)
class PbsConfig:
    slots_per_node: int | None = None
    pbsbatch_args: list[str] = field(default_factory=list)
    walltime_seconds: int | None = None
    queue: str | None = None
    account: str | None = None

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> PbsConfig:
        fields = {k: v for k, v in raw.items() if k != "walltime"}
        return cls(**fields, walltime_seconds=_seconds(raw["walltime"]))
