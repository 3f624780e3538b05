"""The cluster as `hpcdet cluster show` and the UI's cluster page show it: the backend in use,
what its scheduler reports of partitions (queues) and limits, hpcdet's slots in use, and the
container runtime found here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpcdet.config.cluster import load_cluster_config
from hpcdet.doctor.runtime_check import ask_version
from hpcdet.errors import SchedulerCommandError
from hpcdet.paths import StatePaths
from hpcdet.schedulers import Scheduler, make_scheduler
from hpcdet.schedulers.runner import CommandRunner


def site_scheduler(paths: StatePaths) -> Scheduler:
    """The backend the cluster settings name, for asking (not submitting)."""
    cfg = load_cluster_config()
    return make_scheduler(cfg.backend, {"jobs_dir": str(paths.local_jobs()),
                                        "template_dir": cfg.template_dir})


@dataclass(frozen=True)
class RuntimeView:
    """The cluster config's container runtime as this host has it."""

    name: str
    path: str  # "" when it is not on PATH
    version: str  # "apptainer 1.4.5"; "" when it did not say
    problem: str  # "" or what went wrong asking it (Docker: a daemon that did not answer)

    def describe(self) -> str:
        """``apptainer 1.4.5 at /usr/bin/apptainer``; ``singularity (apptainer 1.4.5) at ...``;
        ``enroot not found on PATH``."""
        if not self.path:
            return f"{self.name} not found on PATH"
        said = (self.version if self.version.startswith(self.name + " ") else
                f"{self.name} ({self.version or 'version unknown'})")
        return f"{said} at {self.path}" + (f"; {self.problem}" if self.problem else "")


@dataclass(frozen=True)
class ClusterView:
    backend: str
    reported: list[tuple[str, str]]  # (what, the scheduler's words), partitions first
    problem: str  # "" or why the scheduler did not answer
    runtime: RuntimeView | None = None


def daemon_view(paths: StatePaths) -> dict[str, Any]:
    """Where the daemon runs and what keeps it from its work, as the UI's cluster page shows
    it: a scheduler that does not answer it (since when), a host not heard from."""
    from hpcdet.protocol import process

    current = process.info(paths)
    holder = current.holder
    return {"alive": current.alive, "where": holder.where() if holder else "",
            "heartbeat": holder.heartbeat if holder else None,
            "warnings": [w for w in (current.unreachable(), current.silent()) if w]}


def runtime_view(name: str, runner: CommandRunner) -> RuntimeView:
    """Where ``name`` is on PATH here and the version it tells (``containers.version_argvs``),
    through the command runner; what failed is said, never raised."""
    return RuntimeView(name, *ask_version(name, runner))


def cluster_view(scheduler: Scheduler, runtime: str | None = None) -> ClusterView:
    """``runtime``: the container runtime to look for (default: the cluster config's)."""
    runner = CommandRunner(timeout=30)
    found = runtime_view(runtime or load_cluster_config().container_runtime, runner)
    try:
        outputs = [runner.run(cmd).stdout for cmd in scheduler.info_commands()]
    except SchedulerCommandError as e:
        return ClusterView(scheduler.name, [], str(e), found)
    return ClusterView(scheduler.name, scheduler.parse_info(outputs), "", found)
