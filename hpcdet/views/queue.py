"""The job queue as `hpcdet job list` shows it: hpcdet's jobs (experiments) in the order the
scheduler would start them (``queue`` is pure: built from stored records and one status
answer), and which experiment a job id names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hpcdet.errors import NotFoundError, SchedulerCommandError
from hpcdet.priority import DEFAULT_PRIORITY, job_number, queue_key
from hpcdet.records import ExperimentRecord as Experiment
from hpcdet.records import RunRecord as Run
from hpcdet.records import TrialRecord as Trial
from hpcdet.schedulers import Scheduler
from hpcdet.schedulers.base import JobStatus
from hpcdet.schedulers.runner import CommandRunner
from hpcdet.states import (
    LIVE_RUN_STATES,
    QUEUED_TRIAL_STATES,
    UNFINISHED_EXPERIMENT_STATES,
    JobState,
    QueueState,
)
from hpcdet.store.queries import Queries


@dataclass(frozen=True)
class QueueRow:
    job_id: str
    name: str
    priority: int
    weight: float
    submitted: float
    acquired: int
    needed: int
    state: QueueState
    reason: str
    expected_start: float | None  # the scheduler's estimate for its first pending job
    resource_pool: str
    partitions: tuple[str, ...]  # where the scheduler holds its jobs now
    scheduler_ids: tuple[str, ...]
    # Determined's job type: TYPE_EXPERIMENT, or TYPE_COMMAND, TYPE_NOTEBOOK, TYPE_SHELL.
    type: str = "TYPE_EXPERIMENT"

    def in_pool(self, pool: str) -> bool:
        """Named by its resource pool, or by a partition (queue) its jobs are in."""
        return pool in (self.resource_pool, *self.partitions)


def queue(
    experiments: Sequence[Experiment],
    trials: Sequence[Trial],
    runs: Sequence[Run],
    statuses: Mapping[str, JobStatus],
) -> list[QueueRow]:
    """Unfinished experiments: not yet submitted first (in hpcdet's order: priority, then
    queue position), then those the scheduler holds pending (in the order it would start
    them), then running ones."""
    by_exp: dict[int, list[Trial]] = {}
    for t in trials:
        by_exp.setdefault(t.experiment_id, []).append(t)
    live = {r.trial_id: r for r in runs if r.state in LIVE_RUN_STATES}
    keyed = []
    for exp in experiments:
        if exp.state not in UNFINISHED_EXPERIMENT_STATES:
            continue
        slots = max(1, int(exp.stored_config.get("resources", {})
                           .get("slots_per_trial", 1)))
        mine = [t for t in by_exp.get(exp.id, []) if t.state in QUEUED_TRIAL_STATES]
        jobs = [live[t.id] for t in mine if t.id in live]
        found = [statuses[r.job_id] for r in jobs if r.job_id in statuses]
        running = [s for s in found if s.state == JobState.RUNNING]
        pending = [s for s in found if s.state == JobState.PENDING]
        reasons = sorted({s.reason for s in pending if s.reason})
        row = QueueRow(
            job_id=str(exp.id), name=f"{exp.name} ({exp.id})",
            priority=exp.priority or DEFAULT_PRIORITY, weight=exp.weight, submitted=exp.created,
            acquired=slots * len(running), needed=slots * len(mine),
            state=QueueState.SCHEDULED if running else QueueState.QUEUED, reason="; ".join(reasons),
            expected_start=min((s.start for s in pending if s.start), default=None),
            resource_pool=exp.resource_pool or "default",
            partitions=tuple(sorted({s.partition for s in found if s.partition})),
            scheduler_ids=tuple(sorted({r.job_id for r in jobs if r.job_id})),
            type=f"TYPE_{(exp.task or 'experiment').upper()}",
        )
        group = 2 if running and not pending else (1 if jobs else 0)
        # Schedulers start the highest priority first and, on a tie, the lowest job id.
        first = min(((-(s.priority or 0), job_number(r.job_id)) for r in jobs
                     if (s := statuses.get(r.job_id)) and s.state == JobState.PENDING),
                    default=(0, 0))
        keyed.append(((group, *first, *queue_key(exp)), row))
    return [row for _, row in sorted(keyed, key=lambda kv: kv[0])]


def scheduler_statuses(scheduler: Scheduler) -> tuple[dict[str, JobStatus], str]:
    """The scheduler's word on the user's jobs now, and "" or why it gave none."""
    try:
        out = CommandRunner(timeout=30).run(scheduler.status_command([])).stdout
        return scheduler.parse_status(out), ""
    except (SchedulerCommandError, ValueError) as e:
        return {}, str(e)


def job_queue(store: Queries, statuses: Mapping[str, JobStatus],
              resource_pool: str | None = None) -> list[QueueRow]:
    """The unfinished experiments as ``queue`` orders them, of one pool (or partition)."""
    trials = store.trials()
    runs = store.runs(live_only=True)
    return [r for r in queue(store.experiments(unfinished=True), trials, runs, statuses)
            if resource_pool is None or r.in_pool(resource_pool)]


def experiment_of(store: Queries, job_id: str, scheduler: Scheduler) -> int:
    """The experiment an hpcdet job id (the experiment id) or a scheduler job id names (a task
    of an array, or the array)."""
    experiments = store.experiments()
    if job_id.isdigit() and any(e.id == int(job_id) for e in experiments):
        return int(job_id)
    experiment_of = {t.id: t.experiment_id for t in store.trials()}
    owners = [(a.job_id, a.experiment_id) for a in store.arrays()]
    owners += [(r.job_id, experiment_of[r.trial_id]) for r in store.runs() if r.job_id]
    for scheduler_id, exp_id in owners:
        if scheduler_id in (job_id, scheduler.array_of(job_id)) or (
                job_id == scheduler.array_of(scheduler_id)):
            return int(exp_id)
    raise NotFoundError(f"no job {job_id!r}; see `hpcdet job list`")
