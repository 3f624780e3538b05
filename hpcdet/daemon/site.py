"""What the site's scheduler offers: partitions (to refuse trials that can never fit, and to
know which have GPUs) and its limits (array size, job count, whether accounting exists)."""

from __future__ import annotations

import logging

from hpcdet.config import ExperimentConfig
from hpcdet.config.cluster import ClusterConfig
from hpcdet.errors import SchedulerCommandError
from hpcdet.schedulers import Scheduler
from hpcdet.schedulers.base import Partition, Placement, fit_problem, place
from hpcdet.schedulers.runner import CommandRunner

log = logging.getLogger(__name__)


class Site:
    def __init__(self, scheduler: Scheduler, runner: CommandRunner, cluster: ClusterConfig
                 ) -> None:
        self.scheduler = scheduler
        self.runner = runner
        self.cluster = cluster
        self.partitions: dict[str, Partition] = {}
        self.nodes: Partition | None = None  # what any pool's jobs may use (nodes_command)

    def read(self) -> None:
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
        """The partition the experiment's jobs go to, if the scheduler told us about it."""
        return self.partitions.get(self.partition_name(cfg)) or self.nodes

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
