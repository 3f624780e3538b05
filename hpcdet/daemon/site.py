"""What the site's scheduler offers: partitions (to refuse trials that can never fit, and to
know which have GPUs) and its limits (array size, job count, whether accounting exists).

A cluster changes under a daemon that runs for weeks: partitions are added, nodes resized,
limits raised. What the site offers is read again at least every ``READ_EVERY`` seconds, when
a config names a partition not known (at most every ``UNKNOWN_EVERY`` seconds for one name),
and when the scheduler refused a job for a node configuration it no longer has (``stale``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from hpcdet.config import ExperimentConfig
from hpcdet.config.cluster import ClusterConfig
from hpcdet.errors import SchedulerCommandError
from hpcdet.schedulers import Scheduler
from hpcdet.schedulers.base import Partition, Placement, fit_problem, place
from hpcdet.schedulers.runner import CommandRunner

log = logging.getLogger(__name__)

READ_EVERY = 3600.0
UNKNOWN_EVERY = 60.0


class Site:
    def __init__(self, scheduler: Scheduler, runner: CommandRunner, cluster: ClusterConfig,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.scheduler = scheduler
        self.runner = runner
        self.cluster = cluster
        self.clock = clock
        self.partitions: dict[str, Partition] = {}
        self.nodes: Partition | None = None  # what any pool's jobs may use (nodes_command)
        self.read_at: float | None = None
        self._unknown_asked: dict[str, float] = {}  # partition name -> when last looked for

    def refresh(self) -> None:
        """Read the site again when the last read is ``READ_EVERY`` old."""
        if self.read_at is None or self.clock() - self.read_at >= READ_EVERY:
            self.read()

    def stale(self) -> None:
        """The scheduler refused a job for a node configuration it does not have: what it
        offers changed since the last read."""
        log.info("the %s site changed since it was read: reading it again",
                 self.scheduler.name)
        self.read()

    def read(self) -> None:
        self.read_at = self.clock()
        cmd = self.scheduler.partitions_command()
        if cmd is not None:
            try:
                parts = self.scheduler.parse_partitions(self.runner.run(cmd).stdout)
                self.partitions = {p.name: p for p in parts}
            except SchedulerCommandError as e:
                log.warning("could not list partitions: %s", e)
        cmd = self.scheduler.nodes_command()
        if cmd is not None:
            try:
                self.nodes = self.scheduler.parse_nodes(self.runner.run(cmd).stdout)
            except (SchedulerCommandError, ValueError) as e:
                log.warning("could not list the %s nodes: %s", self.scheduler.name, e)
        cmd = self.scheduler.limits_command()
        if cmd is None:
            return
        try:
            self.scheduler.limits = self.scheduler.parse_limits(self.runner.run(cmd).stdout)
        except SchedulerCommandError as e:
            log.warning("could not read the %s site limits: %s", self.scheduler.name, e)

    def partition_name(self, cfg: ExperimentConfig) -> str:
        """The partition the experiment's jobs go to ('' if unknown, e.g. on local)."""
        name = (self.scheduler.options(cfg).pool
                or self.cluster.partition_for(cfg.resources.resource_pool))
        if name is None:
            return next((p.name for p in self.partitions.values() if p.default), "")
        return name

    def partition(self, cfg: ExperimentConfig) -> Partition | None:
        """The partition the experiment's jobs go to, if the scheduler told us about it (a
        name not known is asked for again: it may have been added since the last read)."""
        name = self.partition_name(cfg)
        found = self.partitions.get(name)
        if found is None and name and self.partitions and self._may_look_for(name):
            log.info("partition %r was not there at the last read: reading the site again", name)
            self.read()
            found = self.partitions.get(name)
        return found or self.nodes

    def _may_look_for(self, name: str) -> bool:
        now = self.clock()
        last = self._unknown_asked.get(name)
        if last is not None and now - last < UNKNOWN_EVERY:
            return False
        self._unknown_asked[name] = now
        return True

    def placement(self, cfg: ExperimentConfig) -> Placement:
        """How the experiment's trials lay their slots over the partition's nodes."""
        return place(cfg.resources.slots_per_trial, self.scheduler.options(cfg).slots_per_node,
                     self.partition(cfg))

    def fit_problem(self, cfg: ExperimentConfig, placed: Placement | None = None) -> str | None:
        """Why the experiment's trials can never run on its partition, or None; ``placed``:
        its `placement`, when the caller has it already."""
        partition = self.partition(cfg)
        if partition is None:
            return None
        placed = placed or self.placement(cfg)
        return fit_problem(placed.nodes, placed.slots_per_node, partition)
