"""The scheduler interface: backends build commands as data and parse output in pure functions.

Only ``hpcdet.schedulers.runner`` executes commands. A backend never sleeps, polls or retries;
the daemon decides when to call it.
"""

from __future__ import annotations

import abc
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from hpcdet.config import ExperimentConfig
from hpcdet.config.directives import problem
from hpcdet.errors import ConfigError
from hpcdet.states import JobState


@dataclass(frozen=True)
class JobStatus:
    state: JobState
    reason: str = ""  # in words, for people
    native: str = ""  # the scheduler's own code
    exit_code: int | None = None
    nodes: str = ""
    name: str = ""
    priority: int | None = None  # the scheduler's own number (higher starts first on Slurm)
    nice: int | None = None
    partition: str = ""
    start: float | None = None  # when it started or, pending, is expected to (if known)
    workdir: str = ""  # where it runs, if the scheduler says
    # Its place in the scheduler's queue, where the user may exchange places (PBS's qorder);
    # None elsewhere.
    position: int | None = None
    # The scheduler took it but says it can never start as asked (PBS: "Can Never Run").
    never_runs: bool = False
    # Its own account, where it keeps one: seconds run so far (all, once ended) and the GPUs
    # and CPUs allocated (sacct's ElapsedRaw and AllocTRES; PBS's resources_used.walltime and
    # Resource_List). None where it does not say.
    used_seconds: float | None = None
    used_gpus: int | None = None
    used_cpus: int | None = None


@dataclass(frozen=True)
class Partition:
    """What a partition (Slurm) or queue (PBS) offers, as far as fitting a trial goes."""

    name: str
    nodes: int
    cpus_per_node: int
    gpus_per_node: int = 0
    default: bool = False


@dataclass(frozen=True)
class Placement:
    """How a trial's slots are laid over nodes: ``nodes`` x ``slots_per_node``; the slots are
    GPUs where the partition has GPUs (``gpus``), else CPUs."""

    nodes: int
    slots_per_node: int
    gpus: bool = False


def place(slots: int, slots_per_node: int | None, partition: Partition | None) -> Placement:
    """Where a trial of ``slots`` slots goes.

    ``slots_per_node`` (the config's) forces the split. Without it, as Determined lets the
    scheduler spread GPU slots over nodes, the trial takes as few nodes of the partition as
    hold its slots in equal shares (8 slots on 4-slot nodes: 2 x 4); with no partition known,
    or when no equal split fits, one node of all the slots (`fit_problem` then says why it
    cannot run).
    """
    slots = max(slots, 1)
    gpus = partition is not None and partition.gpus_per_node > 0
    if slots_per_node:
        per_node = min(slots_per_node, slots)
        return Placement(-(-slots // per_node), per_node, gpus)
    if partition is not None:
        cap = partition.gpus_per_node or partition.cpus_per_node
        if cap and slots > cap:
            for nodes in range(-(-slots // cap), partition.nodes + 1):
                if slots % nodes == 0:
                    return Placement(nodes, slots // nodes, gpus)
    return Placement(1, slots, gpus)


def fit_problem(nodes: int, per_node: int, partition: Partition) -> str | None:
    """Why a trial of ``nodes`` x ``per_node`` slots can never run in ``partition``, or None.

    Slots are GPUs where the partition has GPUs, otherwise CPUs.
    """
    kind, cap = ("GPU", partition.gpus_per_node) if partition.gpus_per_node else (
        "CPU", partition.cpus_per_node)
    if nodes <= partition.nodes and per_node <= cap:
        return None
    return (
        f"the trial needs {nodes} node(s) x {per_node} {kind} slot(s), but partition "
        f"{partition.name!r} has {partition.nodes} node(s) with {cap} {kind}(s) each; lower "
        "resources.slots_per_trial (to a multiple of the slots one node has, or one its nodes"
        " can share equally), set slots_per_node in the slurm: or pbs: section, or choose"
        " another resource_pool"
    )


@dataclass(frozen=True)
class SiteLimits:
    """What the site's scheduler allows, as far as hpcdet plans by it (None: not known)."""

    max_array_size: int | None = None  # tasks per array: indices 0 .. max_array_size-1
    max_jobs: int | None = None
    accounting: bool = False  # finished jobs can be asked about after the queue forgets them


@dataclass(frozen=True)
class BatchOptions:
    """The experiment config's section of one backend (``slurm:`` or ``pbs:``), in common terms.

    ``pool`` is the partition (Slurm) or queue (PBS) the section names; ``section`` names the
    section in messages.
    """

    section: str
    slots_per_node: int | None = None
    walltime_seconds: int | None = None
    pool: str | None = None
    account: str | None = None
    qos: str | None = None
    gpu_type: str | None = None
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class ArraySpec:
    """A job array: task k runs search request ``offset + k`` (k < ``count``), at most
    ``throttle`` at once (0: no limit)."""

    count: int
    offset: int = 0
    throttle: int = 0


@dataclass
class JobRequest:
    """Everything a backend needs to render one batch script.

    For an array, ``run_dir`` is the experiment's array directory that holds the slot files.
    """

    name: str
    run_dir: Path
    python: str
    num_nodes: int = 1
    slots_per_node: int = 1
    gpus: bool = False
    gpu_type: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    walltime_seconds: int | None = None
    preempt_grace_seconds: int = 120
    nice: int | None = None
    extra_args: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    array: ArraySpec | None = None
    # A pilot allocation of a packed search (hpcdet.launch.pilot): ``run_dir`` is its
    # directory, where the daemon hands it runs.
    pilot: bool = False

    @property
    def deadline_after(self) -> int:
        """Seconds after its start by which the job's runs should checkpoint (0: none)."""
        limit = self.walltime_seconds
        return max(0, limit - self.preempt_grace_seconds) if limit else 0


# Directive values of a job request: (field, kind in directives.KINDS, where the user sets it).
_HEADER_VALUES = (
    ("partition", "names", "slurm.partition, resources.resource_pool or the cluster file's"
     " partitions/default_pool"),
    ("account", "name", "slurm.account or the cluster file's account"),
    ("qos", "name", "slurm.qos or the cluster file's qos"),
    ("gpu_type", "name", "slurm.gpu_type or the cluster file's gpu_type"),
)
_NUMBERS = ("num_nodes", "slots_per_node", "walltime_seconds", "preempt_grace_seconds", "nice")


def check_request(job: JobRequest, header: bool = True) -> None:
    """Refuse a request with a value that must not reach its batch script.

    Config loading checks the same values with their YAML paths; this catches one that got
    past it (a config stored by an older hpcdet, a state directory's path) before anything
    renders. ``header``: the backend writes scheduler directives (partition, account, ...).

    Raises:
        ConfigError: naming each value, the character at fault and where it is set.
    """
    found = [
        ("the job name", job.name, "name"),
        ("the run directory", str(job.run_dir), "text"),
        ("the Python interpreter", job.python, "text"),
        *(("an environment_variables name", key, "variable") for key in job.environment),
    ]
    if header:
        found += [(f"{field} (from {where})", getattr(job, field), kind)
                  for field, kind, where in _HEADER_VALUES if getattr(job, field) is not None]
        # sbatch_args are checked as long options at load; here only what would break a line,
        # so an entry stored by an older hpcdet still renders.
        found += [("a slurm.sbatch_args entry", arg, "text") for arg in job.extra_args]
    problems = [f"{what} {value!r} {said}" for what, value, kind in found
                if (said := problem(value, kind)) is not None]
    numbers = [(name, getattr(job, name)) for name in _NUMBERS]
    if job.array is not None:
        numbers += [(f"array.{name}", getattr(job.array, name))
                    for name in ("count", "offset", "throttle")]
    problems += [f"{name} must be an integer, got {value!r}" for name, value in numbers
                 if value is not None and (isinstance(value, bool) or not isinstance(value, int))]
    if problems:
        raise ConfigError(problems, source="job request (nothing was submitted)")


class Scheduler(abc.ABC):
    """One batch system. Methods build commands as data and parse their output; none runs
    anything. ``limits`` is what the site allows, once the daemon has read it
    (``limits_command``/``parse_limits``)."""

    name: ClassVar[str]
    supports_arrays: ClassVar[bool] = False
    # Nice units per Determined priority step above the default (`hpcdet.priority.nice_for`).
    nice_per_step: ClassVar[int] = 100

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        self.settings = settings or {}
        self.limits = SiteLimits()

    @abc.abstractmethod
    def options(self, cfg: ExperimentConfig) -> BatchOptions:
        """The experiment config's section of this backend."""

    @abc.abstractmethod
    def render_script(self, job: JobRequest) -> str: ...

    @abc.abstractmethod
    def submit_command(self, script: Path) -> list[str]: ...

    @abc.abstractmethod
    def parse_job_id(self, stdout: str) -> str: ...

    @abc.abstractmethod
    def status_command(self, job_ids: Collection[str]) -> list[str]:
        """One command that reports on all of ``job_ids`` at once."""

    @abc.abstractmethod
    def parse_status(self, stdout: str) -> dict[str, JobStatus]: ...

    # Words of a refused submission's output that mean "not now" rather than "never": the
    # daemon tries the submission again later instead of failing the experiment.
    transient_refusals: ClassVar[tuple[str, ...]] = ()

    def refusal_is_transient(self, output: str) -> bool:
        """Whether a refused submission's output says the scheduler may take it later."""
        return any(words in output for words in self.transient_refusals)

    # Words of a refused submission's output that say the site's nodes or partitions are not
    # what the daemon read (Site.stale reads them again).
    site_changed_refusals: ClassVar[tuple[str, ...]] = ()

    def refusal_means_site_changed(self, output: str) -> bool:
        return any(words in output for words in self.site_changed_refusals)

    # Words of a refused submission's output, and what the user can do about them.
    refusal_advice: ClassVar[tuple[tuple[str, str], ...]] = ()

    def advice_for(self, output: str) -> str:
        """What to do about a refused submission, when its output says (else "")."""
        return next((advice for words, advice in self.refusal_advice if words in output), "")

    def answered(self, exit_code: int, stderr: str) -> bool:
        """Whether a status query's output can be read (some schedulers exit non-zero when a
        job asked about is no longer known, and still report the others)."""
        return exit_code == 0

    @abc.abstractmethod
    def cancel_command(self, job_ids: Collection[str]) -> list[str]: ...

    def nothing_to_cancel(self, exit_code: int, stderr: str) -> bool:
        """Whether a failed cancel command only said that jobs had already ended or are no
        longer known: nothing is left to cancel."""
        return False

    def array_task_id(self, job_id: str, index: int) -> str:
        """How the status query names task ``index`` of array ``job_id``."""
        return f"{job_id}_{index}"

    def array_of(self, job_id: str) -> str:
        """The id of the array a task id belongs to; any other job id as it is."""
        return job_id.split("_")[0]

    def job_number(self, job_id: str) -> int:
        """The number in a job id, by which the scheduler breaks ties (0 if none)."""
        base = self.array_of(job_id)
        return int(base) if base.isdigit() else 0

    def limits_command(self) -> list[str] | None:
        """A command whose output ``parse_limits`` reads (None: nothing to ask)."""
        return None

    def parse_limits(self, stdout: str) -> SiteLimits:
        return SiteLimits()

    def hold_command(self, job_ids: Collection[str]) -> list[str] | None:
        """Keep pending jobs from starting (None: not supported)."""
        return None

    def join_command(self, job_id: str, argv: list[str]) -> list[str] | None:
        """``argv`` run with a terminal inside the running job's allocation, beside what runs
        there (None: the batch system has no way to; ``join_refused`` says what it offers)."""
        return None

    def join_refused(self) -> str:
        return f"{self.name} cannot start a command inside a running job"

    def release_command(self, job_ids: Collection[str]) -> list[str] | None:
        """Let held jobs start again (None: not supported)."""
        return None

    def nice_command(self, job_ids: Collection[str], nice: int) -> list[str] | None:
        """Set the nice value of jobs (arrays: all their tasks). None: not supported."""
        return None

    def order_command(self, first: str, second: str) -> list[str] | None:
        """Exchange the queue places of two pending jobs (None: not supported)."""
        return None

    def move_command(self, job_ids: Collection[str], partition: str) -> list[str] | None:
        """Move pending jobs to another partition (queue). None: not supported."""
        return None

    def probe_command(self, script: Path, partition: str) -> list[str] | None:
        """A dry-run submission of ``script`` to ``partition``: fails if the site refuses it."""
        return None

    def final_status_command(self, job_ids: Collection[str]) -> list[str] | None:
        """One command for jobs the status query no longer lists (None: no such source)."""
        return None

    def parse_final_status(self, stdout: str) -> dict[str, JobStatus]:
        return {}

    def info_commands(self) -> list[list[str]]:
        """Commands whose outputs `parse_info` turns into `hpcdet cluster show`'s report."""
        return []

    def parse_info(self, outputs: list[str]) -> list[tuple[str, str]]:
        """(what, value) rows: partitions, nodes, slots and limits the scheduler reports."""
        return []

    def nodes_command(self) -> list[str] | None:
        """A command listing the nodes any job may use, where the scheduler's pools (PBS
        queues) do not own nodes (None: the partitions say it all)."""
        return None

    def parse_nodes(self, stdout: str) -> Partition | None:
        return None

    def partitions_command(self) -> list[str] | None:
        """A command listing partitions (None: nothing to ask, e.g. the local backend)."""
        return None

    def parse_partitions(self, stdout: str) -> list[Partition]:
        return []
