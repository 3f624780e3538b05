"""The job queue: `hpcdet job update` and the order of the user's pending jobs on the scheduler.

Priority, queue position (`--ahead-of`/`--behind-of`) and weight are stored per experiment; the
order they mean is made the scheduler's by nice values (`hpcdet.priority.plan_nice`), checked
after every status query, so new submissions and finished jobs keep the order true. A resource
pool change moves pending jobs at once (after a dry-run submission that the site may refuse)
and running trials after a checkpoint (`_sync_control` preempts a run outside its pool).
Every update of a request is checked before any is applied; a scheduler refusal undoes what
the request had changed on the scheduler and records nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcdet.daemon.configs import Configs
from hpcdet.daemon.controls import Controls
from hpcdet.daemon.jobs import Jobs
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.site import Site
from hpcdet.errors import HpcdetError, NotFoundError, SchedulerCommandError, StateError
from hpcdet.paths import StatePaths
from hpcdet.priority import DEFAULT_PRIORITY, PendingJob, plan_nice, position_between, validate
from hpcdet.records import ExperimentRecord as Experiment
from hpcdet.rundir import layout
from hpcdet.states import RUNNING_EXPERIMENT_STATES, JobState
from hpcdet.store.entries import ExperimentQueueUpdated
from hpcdet.store.queries import queue_update_preview
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)

FIELDS = ("priority", "weight", "resource_pool", "ahead_of", "behind_of")


@dataclass(frozen=True)
class _Moved:
    job_ids: tuple[str, ...]
    old: str


class Queue:
    """Queue order on the scheduler and the `update_jobs` request."""

    def __init__(self, store: Store, journal: Journal, paths: StatePaths, configs: Configs,
                 jobs: Jobs, site: Site, controls: Controls) -> None:
        self.store = store
        self.journal = journal
        self.paths = paths
        self.configs = configs
        self.jobs = jobs
        self.scheduler = jobs.scheduler
        self.runner = jobs.runner
        self.site = site
        self.controls = controls
        self.nice_refused: set[tuple[str, int]] = set()  # (job, nice) the scheduler refused
        # Place exchanges it refused, and those made after a poll: a scheduler whose listing
        # does not show the new places must not get the same exchange every tick.
        self.order_refused: set[tuple[str, str]] = set()
        self.order_made: set[tuple[str, str]] = set()

    # ------------------------------------------------------------------ the order, every poll

    def order(self, experiments: dict[int, Experiment] | None = None,
              strict: bool = False) -> None:
        """Give the user's pending jobs the nice values of hpcdet's order (and, where the
        scheduler lets the user exchange queue places, those places).

        ``strict``: a refused change undoes the others and raises; otherwise it is logged and
        not asked again (the same nice for the same jobs) while this daemon runs.
        """
        if self.scheduler.nice_command([], 0) is None:
            return
        exps = experiments or {e.id: e for e in self.store.experiments(unfinished=True)}
        jobs = list(self._pending_jobs(exps))
        current = {j.job_id: j.nice for j in jobs}
        by_nice: dict[int, list[str]] = {}
        for job_id, nice in plan_nice(jobs, self.scheduler.nice_per_step).items():
            if nice != current[job_id] and (strict or (job_id, nice) not in self.nice_refused):
                by_nice.setdefault(nice, []).append(job_id)
        done: list[str] = []
        for nice, ids in sorted(by_nice.items()):
            try:
                self.runner.run(self._nice(ids, nice))
            except SchedulerCommandError as e:
                if not strict:
                    log.warning("could not set nice %d on jobs %s: %s", nice, ", ".join(ids),
                                _said(e))
                    self.nice_refused.update((job_id, nice) for job_id in ids)
                    continue
                for job_id in done:
                    self.runner.run(self._nice([job_id], current[job_id]), check=False)
                raise
            done += ids
        if self.scheduler.order_command("", "") is None:
            return
        try:
            self._reorder(jobs, strict)
        except SchedulerCommandError:  # strict: nothing of this request stays applied
            for job_id in done:
                self.runner.run(self._nice([job_id], current[job_id]), check=False)
            raise

    def _reorder(self, jobs: list[PendingJob], strict: bool) -> None:
        """Where the scheduler lets the user exchange queue places (``order_command``), also
        put the user's queued jobs in hpcdet's order: schedulers that go by queue order and not
        by priority then start them in it too. Only places the user's jobs hold are exchanged.
        """
        by_partition: dict[str, list[tuple[int, PendingJob]]] = {}
        for job in jobs:
            status = self.jobs.statuses.get(job.job_id)
            if status is not None and status.position is not None:
                by_partition.setdefault(job.partition, []).append((status.position, job))
        done: list[tuple[str, str]] = []
        for group in by_partition.values():
            current = [job.job_id for _, job in sorted(group, key=lambda pj: pj[0])]
            wanted = [job.job_id for job in sorted(
                (job for _, job in group), key=lambda j: (j.priority, j.position,
                                                          self.scheduler.job_number(j.job_id)))]
            for i, want in enumerate(wanted):
                there = current[i]
                pair = (want, there)
                if there == want or (not strict and (
                        pair in self.order_refused or pair in self.order_made)):
                    continue
                cmd = self.scheduler.order_command(want, there)
                assert cmd is not None, "checked by order"
                try:
                    self.runner.run(cmd)
                except SchedulerCommandError as e:
                    if strict:
                        for first, second in reversed(done):
                            undo = self.scheduler.order_command(first, second)
                            if undo is not None:
                                self.runner.run(undo, check=False)
                        raise
                    log.warning("could not exchange the queue places of %s and %s: %s",
                                want, there, _said(e))
                    self.order_refused.add((want, there))
                    continue
                done.append((want, there))
                self.order_made.add((want, there))
                k = current.index(want)
                current[i], current[k] = want, there

    def _nice(self, job_ids: list[str], nice: int) -> list[str]:
        cmd = self.scheduler.nice_command(job_ids, nice)
        assert cmd is not None, "checked by order"
        return cmd

    def _pending_jobs(self, exps: dict[int, Experiment]) -> Iterable[PendingJob]:
        """Pending scheduler jobs of the unfinished experiments, one per job (arrays: one)."""
        if not any(s.state == JobState.PENDING for s in self.jobs.statuses.values()):
            return
        owner = {job_id: exps[exp_id] for exp_id, ids in self._job_ids().items()
                 if exp_id in exps for job_id in ids}
        seen: set[str] = set()
        for job_id, status in self.jobs.statuses.items():
            base = self.scheduler.array_of(job_id)
            exp = owner.get(base)
            if (status.state != JobState.PENDING or exp is None or base in seen
                    or status.priority is None or status.nice is None):
                continue
            seen.add(base)
            yield PendingJob(base, status.partition, _priority(exp), exp.position,
                             status.priority, status.nice)

    # ------------------------------------------------------------------ `hpcdet job update`

    def update_jobs(self, updates: list[dict[str, Any]]) -> str:
        """Updates as {"job": experiment id, "field": one of FIELDS, "value": ...}, in order."""
        exps = {e.id: e for e in self.store.experiments(unfinished=True)}
        changed: dict[int, dict[str, Any]] = {}
        notes = []
        for update in updates:
            exp_id, field, value = int(update["job"]), update["field"], update["value"]
            exp = self._queued(exps, exp_id)
            if field == "priority":
                try:
                    record: dict[str, Any] = {"priority": validate(int(value))}
                except ValueError as e:
                    raise StateError(f"job {exp_id}: {e}") from None
            elif field == "weight":
                if float(value) < 0:
                    raise StateError(f"job {exp_id}: weight must be 0 or more, not {value}")
                record = {"weight": float(value)}
                notes.append(f"job {exp_id}: weight {float(value):g} is stored but not "
                             f"applied: {self.scheduler.name} has no per-job fair-share weight")
            elif field == "resource_pool":
                record = {"resource_pool": self._check_pool(exp, str(value))}
            elif field in ("ahead_of", "behind_of"):
                anchor = self._queued(exps, int(value))
                record = self._placed(exps, exp, anchor, ahead=field == "ahead_of")
            else:
                raise HpcdetError(f"unknown job update {field!r}; use one of "
                                  f"{', '.join(f.replace('_', '-') for f in FIELDS)}")
            exps[exp_id] = _updated(exp, record)
            changed.setdefault(exp_id, {}).update(record)
        moved: list[_Moved] = []
        self.jobs.poll()
        try:
            for exp_id, record in changed.items():
                if "resource_pool" in record:
                    moved += self._move_pending(exps[exp_id])
            if moved:
                self.jobs.poll()  # the order is per partition
            self.order(exps, strict=True)
        except SchedulerCommandError as e:
            for m in moved:
                cmd = self.scheduler.move_command(m.job_ids, m.old)
                if cmd is not None:
                    self.runner.run(cmd, check=False)
            raise HpcdetError(f"the scheduler refused `{' '.join(e.cmd[:3])}`: {_said(e)}. "
                              "Nothing was changed.") from None
        for exp_id, record in changed.items():
            self.journal.record(exp_id, ExperimentQueueUpdated(**record))
            self.configs.forget(exp_id)
        self.controls.sync_all()  # running trials of a moved experiment checkpoint and move
        return "\n".join(notes)

    def _queued(self, exps: dict[int, Experiment], exp_id: int) -> Experiment:
        exp = exps.get(exp_id)
        if exp is None or exp.state not in RUNNING_EXPERIMENT_STATES:
            state = self.store.experiment(exp_id).state  # raises NotFoundError if none
            raise StateError(f"job {exp_id} is {state}; only ACTIVE or PAUSED experiments are "
                             "in the queue (see `hpcdet job list`)")
        return exp

    def _pool_partition(self, exp: Experiment) -> str:
        """The partition an experiment's jobs go to ('' when the scheduler has none)."""
        return self.site.partition_name(exp.config)

    def _check_pool(self, exp: Experiment, pool: str) -> str:
        if self.scheduler.move_command([], pool) is None:
            raise StateError(f"the {self.scheduler.name} backend has one resource pool; "
                             "--resource-pool needs a cluster scheduler")
        moved = _updated(exp, {"resource_pool": pool})
        partition = self._pool_partition(moved)
        known = ", ".join(sorted(self.site.partitions))
        problem = self.site.fit_problem(moved.config)
        if problem is not None:
            raise StateError(f"job {exp.id} cannot move to resource pool {pool!r}: {problem}")
        script = self._job_script(exp)
        probe = self.scheduler.probe_command(script, partition) if script else None
        if probe is not None:
            # Partitions the user may not use are hidden from sinfo: the dry run tells why.
            try:
                self.runner.run(probe)
            except SchedulerCommandError as e:
                pools = f"; pools (partitions) open to you: {known}" if known else ""
                raise HpcdetError(f"the scheduler refused job {exp.id} in resource pool "
                                  f"{pool!r} (`{' '.join(probe[:2])}`): {_said(e)}{pools}. "
                                  "Nothing was changed.") from None
        elif self.site.partitions and partition not in self.site.partitions:
            raise NotFoundError(f"no resource pool {pool!r} on this cluster; pools (partitions):"
                                f" {known} (see `hpcdet cluster show`)")
        return pool

    def _job_script(self, exp: Experiment) -> Path | None:
        """The newest batch script the experiment submitted, for a dry run elsewhere."""
        scripts = layout.array_scripts(self.paths.experiment(exp.id))
        for trial in self.store.trials(exp.id):
            if trial.run_id:
                run_dir = self.paths.run(exp.id, trial.id, trial.run_id)
                scripts.append(run_dir / layout.SCRIPT_FILE)
        existing = [s for s in scripts if s.exists()]
        return max(existing, key=lambda s: s.stat().st_mtime) if existing else None

    def _move_pending(self, exp: Experiment) -> list[_Moved]:
        """Move the experiment's pending jobs to its (new) partition, now."""
        partition = self._pool_partition(exp)
        mine = self._job_ids().get(exp.id, set())
        by_old: dict[str, set[str]] = {}
        for job_id, status in self.jobs.statuses.items():
            base = self.scheduler.array_of(job_id)
            if status.state == JobState.PENDING and base in mine and status.partition != partition:
                by_old.setdefault(status.partition, set()).add(base)
        moved = []
        for old, ids in sorted(by_old.items()):
            cmd = self.scheduler.move_command(ids, partition)
            if cmd is None:
                break
            try:
                self.runner.run(cmd)
            finally:
                # Even a refused move may have been applied (see SlurmScheduler.move_command).
                moved.append(_Moved(tuple(sorted(ids)), old))
        return moved

    def _job_ids(self) -> dict[int, set[str]]:
        """The scheduler jobs of each experiment with live runs or arrays (an array once)."""
        ids: dict[int, set[str]] = {}
        for exp_id, job_id in self.store.live_jobs():
            ids.setdefault(exp_id, set()).add(self.scheduler.array_of(job_id))
        for array in self.store.arrays():
            ids.setdefault(array.experiment_id, set()).add(array.job_id)
        return ids

    def _placed(self, exps: dict[int, Experiment], exp: Experiment, anchor: Experiment,
                ahead: bool) -> dict[str, Any]:
        """`--ahead-of`/`--behind-of`: the anchor's priority, next to it in hpcdet's order."""
        if anchor.id == exp.id:
            raise StateError(f"job {exp.id} cannot be placed ahead of or behind itself")
        pool = self._pool_partition(anchor)
        if self._pool_partition(exp) != pool:
            raise StateError(
                f"jobs {exp.id} and {anchor.id} are in different resource pools; move job "
                f"{exp.id} first: `hpcdet job update {exp.id} --resource-pool "
                f"{anchor.resource_pool or pool}`")
        peers = sorted((e for e in exps.values()
                        if e.id != exp.id and e.state in RUNNING_EXPERIMENT_STATES
                        and _priority(e) == _priority(anchor)
                        and self._pool_partition(e) == pool),
                       key=lambda e: (e.position, e.id))
        i = [e.id for e in peers].index(anchor.id)
        if ahead:
            before = peers[i - 1].position if i > 0 else None
            position = position_between(before, anchor.position)
        else:
            after = peers[i + 1].position if i + 1 < len(peers) else None
            position = position_between(anchor.position, after)
        return {"priority": _priority(anchor), "position": position}


def _updated(exp: Experiment, record: dict[str, Any]) -> Experiment:
    """A detached copy of ``exp`` with a queue update applied as the journal will apply it."""
    return queue_update_preview(exp, record)


def _priority(exp: Experiment) -> int:
    return exp.priority or DEFAULT_PRIORITY


def _said(e: SchedulerCommandError) -> str:
    return (e.stderr.strip() or e.stdout.strip() or "(no output)").splitlines()[-1]
