"""Packing (``resources.packing``): a search's trials run inside a few pilot allocations,
each holding ``slots`` slots on one node for ``walltime``, which take runs one after another
(``hpcdet.launch.pilot``), instead of a job or array task each.

A pilot lives in ``<exp>/array/pilot-<i>/``: its batch script, the job id the daemon got for
it, the ``status.json`` it keeps while it runs, and ``take/``, where the daemon hands it runs.
A run handed to a pilot keeps the job id ``<pilot job>+<E>.<T>.<R>``: the status query asks
the scheduler of the pilot's job, and a cancel of that id ends the run alone (``RUN_DIR/kill``),
never the allocation. A pilot that ends (its walltime, a scancel) ends its runs as their job
would; the trials go on from their checkpoints in another pilot.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hpcdet.config import ExperimentConfig
from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.jobs import Jobs
from hpcdet.daemon.jobspec import pilot_request
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.site import Site
from hpcdet.paths import StatePaths
from hpcdet.priority import nice_for
from hpcdet.records import ExperimentRecord as Experiment
from hpcdet.records import TrialRecord as Trial
from hpcdet.rundir import layout
from hpcdet.rundir.atomic import read_json, write_text_atomic
from hpcdet.store.entries import RunSubmitted
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)

# A running pilot that has not written its status for this long is gone (killed with its node).
SILENT_SECONDS = 60.0


@dataclass(frozen=True)
class PilotView:
    index: int
    directory: Path
    job_id: str  # "" while its submission is under way
    started: bool  # it has written its status
    ended: bool
    draining: bool


class Packing:
    def __init__(self, store: Store, journal: Journal, paths: StatePaths,
                 cluster: ClusterConfig, jobs: Jobs, site: Site) -> None:
        self.store = store
        self.journal = journal
        self.paths = paths
        self.cluster = cluster
        self.jobs = jobs
        self.site = site

    def pilots(self, exp_id: int) -> list[PilotView]:
        """The experiment's pilots, by index."""
        found = []
        for directory in layout.pilot_dirs(self.paths.experiment(exp_id)):
            status = read_json(directory / layout.PILOT_STATUS) or {}
            job_file = directory / layout.PILOT_JOB
            job_id = (job_file.read_text().strip() if job_file.exists() else "") or str(
                status.get("job_id") or "")
            silent = bool(status) and time.time() - float(status.get("beat") or 0) > SILENT_SECONDS
            ended = ("ended" in status or silent
                     or (bool(job_id) and self.jobs.ended(job_id)))
            found.append(PilotView(int(directory.name[6:]), directory, job_id,
                                   bool(status), ended, bool(status.get("draining"))))
        self.jobs.watched.update(p.job_id for p in found if p.job_id and not p.ended)
        return found

    def hand_out(self, exp: Experiment, cfg: ExperimentConfig, queued: list[Trial],
                 prepare: Callable[[Experiment, Trial], Path | None],
                 submitting: Callable[[Experiment, list[Trial]], None]) -> int:
        """Hand queued trials' next runs to running pilots with room; how many wait still."""
        packing = cfg.resources.packing or {}
        per_pilot = max(1, int(packing["slots"]) // max(1, cfg.resources.slots_per_trial))
        open_pilots = [p for p in self.pilots(exp.id)
                       if p.started and not p.ended and not p.draining and p.job_id]
        load = {p.job_id: 0 for p in open_pilots}
        trials = [t.id for t in self.store.trials(exp.id)]
        for run in self.store.runs(trials, live_only=True):
            holder = layout.pilot_of(run.job_id)
            if holder is not None and holder in load:
                load[holder] += 1
        waiting = 0
        for trial in queued:
            pilot = next((p for p in open_pilots if load[p.job_id] < per_pilot), None)
            if pilot is None:
                waiting += 1
                continue
            run_dir = prepare(exp, trial)
            if run_dir is None:
                continue
            run_id = trial.run_id + 1
            submitting(exp, [trial])
            key = f"{exp.id}.{trial.id}.{run_id}"
            write_text_atomic(pilot.directory / layout.PILOT_TAKE / key, str(run_dir))
            self.journal.record(exp.id, RunSubmitted(
                trial_id=trial.id, run_id=run_id,
                job_id=layout.packed_id(pilot.job_id, exp.id, trial.id, run_id)))
            load[pilot.job_id] += 1
        return waiting

    def pilot_needed(self, exp: Experiment, cfg: ExperimentConfig) -> bool:
        """Whether another pilot should go: none is starting, and fewer than
        ``allocations`` (and the site's job limit) are alive."""
        packing = cfg.resources.packing or {}
        alive = [p for p in self.pilots(exp.id) if not p.ended]
        if any(not p.started for p in alive):
            return False  # one waits in the queue already: it takes the work when it starts
        limit = int(packing.get("allocations") or 1)
        # The user's jobs now, a pilot once however many runs it holds.
        queued = ({layout.pilot_of(j) or j for j in self.store.live_job_ids()}
                  | {p.job_id for p in alive if p.job_id})
        for cap in (self.cluster.max_jobs, self.jobs.scheduler.limits.max_jobs):
            if cap:
                limit = min(limit, len(alive) + max(0, cap - len(queued)))
        return len([p for p in alive if not p.draining]) < limit

    def submit_pilot(self, exp: Experiment, cfg: ExperimentConfig, nice_step: int) -> str:
        """Submit the experiment's next pilot; its job id. Raises what ``Jobs.submit`` does."""
        index = 1 + max((p.index for p in self.pilots(exp.id)), default=-1)
        directory = layout.pilot_dir(self.paths.experiment(exp.id), index)
        (directory / layout.PILOT_TAKE).mkdir(parents=True)
        scheduler = self.jobs.scheduler
        script = directory / layout.SCRIPT_FILE
        script.write_text(scheduler.render_script(pilot_request(
            exp.id, index, directory, cfg, self.cluster, scheduler.options(cfg),
            self.site.placement(cfg), nice_for(exp.priority, nice_step))))
        job_id = self.jobs.submit(script)
        write_text_atomic(directory / layout.PILOT_JOB, job_id)
        self.jobs.watched.add(job_id)
        log.info("experiment %d: pilot allocation %d is job %s", exp.id, index, job_id)
        return job_id

