"""The cluster as `hpcdet cluster show` and the UI's cluster page show it: the backend in use,
what its scheduler reports of partitions (queues) and limits, and hpcdet's slots in use."""

from __future__ import annotations

from dataclasses import dataclass

from hpcdet.config.cluster import load_cluster_config
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
class ClusterView:
    backend: str
    reported: list[tuple[str, str]]  # (what, the scheduler's words), partitions first
    problem: str  # "" or why the scheduler did not answer


def cluster_view(scheduler: Scheduler) -> ClusterView:
    try:
        runner = CommandRunner(timeout=30)
        outputs = [runner.run(cmd).stdout for cmd in scheduler.info_commands()]
    except SchedulerCommandError as e:
        return ClusterView(scheduler.name, [], str(e))
    return ClusterView(scheduler.name, scheduler.parse_info(outputs), "")
