"""Submitting trials: single jobs for runs, and the job arrays of searches, in hpcdet's queue
order and within the site's limits; and, after a start, settling what a killed daemon left
half-submitted."""

from __future__ import annotations

import logging
import shutil
import time
from collections import deque
from pathlib import Path

from hpcdet.config import ExperimentConfig
from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.arrays import next_chunk, owner, slot_room, tasks_waiting
from hpcdet.daemon.configs import Configs
from hpcdet.daemon.controls import Controls
from hpcdet.daemon.guard import Guard
from hpcdet.daemon.jobs import Jobs
from hpcdet.daemon.jobspec import (
    array_job_name,
    array_request,
    job_request,
    run_job_name,
    run_spec,
)
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.packing import Packing
from hpcdet.daemon.searching import SearchDriver
from hpcdet.daemon.site import Site
from hpcdet.errors import SchedulerCommandError
from hpcdet.paths import StatePaths
from hpcdet.priority import nice_for, queue_key
from hpcdet.records import ExperimentRecord as Experiment
from hpcdet.records import RunRecord as Run
from hpcdet.records import TrialRecord as Trial
from hpcdet.rundir import layout
from hpcdet.rundir.atomic import read_json, write_text_atomic
from hpcdet.rundir.layout import EXIT_FILE
from hpcdet.schedulers.base import ArraySpec, Placement
from hpcdet.states import Decision, ExperimentState, JobState, RunState, TrialState
from hpcdet.store.entries import (
    ArrayAbandoned,
    ArraySubmitted,
    ArraySubmitting,
    ExperimentErrorSet,
    RunSubmitted,
    RunSubmitting,
    TrialStateChanged,
)
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)

# How long the scheduler must say a job can never start before its experiment stops.
NEVER_RUNS_GRACE = 600.0
# A submission the scheduler refused for now (its job table or the user's submit limit full,
# its controller unreachable: Scheduler.refusal_is_transient, or no answer in time) holds all
# submissions this long, doubled at each refusal in a row up to HOLD_MAX_SECONDS; then the
# next is tried. One refused attempt a hold, not one a tick: sbatch itself retries for two
# minutes before it gives up, and the daemon waits for it (CommandRunner's timeout).
HOLD_FIRST_SECONDS = 30.0
HOLD_MAX_SECONDS = 300.0


class Submission:
    """Queued trials become jobs or array tasks, within the site's limits."""

    def __init__(
        self, store: Store, journal: Journal, paths: StatePaths, cluster: ClusterConfig,
        configs: Configs, jobs: Jobs, site: Site, search: SearchDriver, controls: Controls,
        guard: Guard,
    ) -> None:
        self.store = store
        self.journal = journal
        self.paths = paths
        self.cluster = cluster
        self.configs = configs
        self.jobs = jobs
        self.scheduler = jobs.scheduler
        self.backend = jobs.scheduler.name
        self.site = site
        self.search = search
        self.controls = controls
        self.guard = guard
        self.packing = Packing(store, journal, paths, cluster, jobs, site)
        self.submissions: deque[float] = deque()  # when, within the last minute
        self.held_until = 0.0  # no submission before (a refusal for now: _held)
        # When the scheduler first said each job can never start (refuse_never_running).
        self.never_since: dict[str, float] = {}
        self.hold_seconds = 0.0  # the last hold's length; 0 after a submission succeeds
        self.held_reason = ""  # the refusal holding submissions; "" when none does
        # Submissions journaled without a job id, to settle at the next poll: what a killed
        # daemon left (so, at start) and what the scheduler refused for now.
        self.unsettled = True

    def submit_queued(self) -> None:
        # In hpcdet's queue order: it decides who gets the site's submission limits first.
        for exp in sorted(self.store.experiments(unfinished=True), key=queue_key):
            if exp.state != ExperimentState.ACTIVE:
                continue
            with self.guard(exp.id, "submission"):
                if not self._submit_experiment(exp):
                    return

    def _submit_experiment(self, exp: Experiment) -> bool:
        """Submit the experiment's queued trials; False once the submission limit is hit."""
        if self.configs.get(exp).resources.packing is not None:
            return self._submit_packed(exp)
        arrays = self._ensure_arrays(exp)
        cap = self.configs.get(exp).trials_at_once
        # Counted only under a cap: most experiments have none, and this runs every tick.
        tasks, singles = self._live_jobs(exp, arrays or []) if cap is not None else (0, 0)
        queued = self.store.trials(exp.id, state=TrialState.QUEUED)
        if arrays is not None:
            in_tasks = [(t, owner(t.request_id, arrays)) for t in queued if t.run_id == 0]
            self._fill_slots(exp, [(t, task) for t, task in in_tasks if task is not None])
            queued = [t for t in queued if t.run_id != 0]  # the rest wait for their array
        for trial in queued:
            if not slot_room(cap, tasks, singles)[1]:
                continue  # resources.max_slots: it waits for a live job to end
            if not self._may_submit():
                return False
            self._submit(exp, trial)
            singles += 1
        return True

    def _submit_packed(self, exp: Experiment) -> bool:
        """Hand the queued trials to the experiment's pilot allocations, and submit another
        when they wait and ``resources.packing.allocations`` allows (hpcdet.daemon.packing)."""
        cfg = self.configs.get(exp)
        if self.site.placement(cfg).nodes > 1:
            self._refuse(exp, "resources.packing runs trials of one node each; this experiment's "
                              "trials span several (slurm.slots_per_node or pbs.slots_per_node "
                              "below resources.slots_per_trial): leave packing out, or fit a "
                              "trial on one node")
            return True
        queued = self.store.trials(exp.id, state=TrialState.QUEUED)
        waiting = self.packing.hand_out(
            exp, cfg, queued, lambda e, t: (p[0] if (p := self._prepare(e, t)) else None),
            self._submitting)
        if not waiting or not self.packing.pilot_needed(exp, cfg):
            return True
        if not self._may_submit():
            return False
        self.submissions.append(time.time())
        try:
            self.packing.submit_pilot(exp, cfg, self.scheduler.nice_per_step)
        except (SchedulerCommandError, ValueError) as e:
            if not self._held(e):
                self._refuse(exp, self.site.fit_problem(cfg)
                             or f"the scheduler refused the pilot allocation: {e}")
            return True
        self._submitted()
        return True

    def _live_jobs(self, exp: Experiment, chunks: list[tuple[str, int, int]]
                   ) -> tuple[int, int]:
        """The experiment's live array tasks and live single jobs (a trial's first run is an
        array task when an array covers its request)."""
        trials = {t.id: t for t in self.store.trials(exp.id)}
        tasks = singles = 0
        for run in self.store.runs(list(trials), live_only=True):
            in_array = run.run_id == 1 and owner(trials[run.trial_id].request_id, chunks)
            tasks, singles = (tasks + 1, singles) if in_array else (tasks, singles + 1)
        return tasks, singles

    def _ensure_arrays(self, exp: Experiment) -> list[tuple[str, int, int]] | None:
        """The experiment's arrays as (job id, offset, count); None if it uses no arrays.

        Submits the next array when the search needs one and the site's limits allow it.
        """
        cfg = self.configs.get(exp)
        bound, concurrency = self.search.bound(exp, cfg)
        if not self.scheduler.supports_arrays or bound <= 1:
            return None
        # A trial replacing one with invalid hyperparameters does not count against the bound,
        # so its request may lie past every array planned so far.
        bound = max(bound, self.store.requests_created(exp.id))
        rows = self.store.arrays(exp.id, submitted=False)
        problem = None if rows else self.site.fit_problem(cfg)
        if problem is not None:
            self._refuse(exp, problem)
            return []
        chunks = [(a.job_id, a.offset, a.count) for a in rows if a.job_id]
        if len(chunks) < len(rows):
            return chunks  # an array the daemon died submitting: _settle_submissions decides
        covered = sum(a.count for a in rows)
        pending = bool(rows) and tasks_waiting(
            rows[-1].job_id, (job_id for job_id, st in self.jobs.statuses.items()
                              if st.state == JobState.PENDING), self.scheduler.array_of)
        if rows and rows[-1].submitted > self.jobs.last_poll:
            pending = True  # not yet seen by a status query
        headroom = None
        if self.cluster.max_jobs:
            headroom = self.cluster.max_jobs - len(self.store.runs(live_only=True))
        chunk = next_chunk(bound, covered, pending, self.scheduler.limits.max_array_size, headroom)
        cap = cfg.trials_at_once
        live = self._live_jobs(exp, chunks) if cap is not None else (0, 0)  # as above
        room, _ = slot_room(cap, *live)
        if chunk is None or room == 0 or not self._may_submit():
            return chunks
        array_dir = layout.array_dir(self.paths.experiment(exp.id))
        array_dir.mkdir(exist_ok=True)
        limits = [n for n in (concurrency, room) if n]  # 0 and None: no limit
        spec = ArraySpec(count=chunk.count, offset=chunk.offset,
                         throttle=min(*limits, chunk.count) if limits else 0)
        index = len(rows)
        script = layout.array_script(self.paths.experiment(exp.id), index)
        placed = self.site.placement(cfg)
        script.write_text(self.scheduler.render_script(array_request(
            exp.id, index, array_dir, spec, cfg, self.cluster, self.scheduler.options(cfg),
            placed, nice_for(exp.priority, self.scheduler.nice_per_step))))
        entry = {"index": index, "offset": chunk.offset, "count": chunk.count,
                 "throttle": spec.throttle}
        self.journal.record(exp.id, ArraySubmitting(**entry))
        self.submissions.append(time.time())
        try:
            job_id = self.jobs.submit(script)
        except (SchedulerCommandError, ValueError) as e:
            if self._held(e):  # left submitting: settle() adopts it if it went after all
                return chunks
            self.journal.record(exp.id, ArrayAbandoned(index=index))
            if not self._laid_out_anew(e, cfg, placed):  # else planned again, laid out anew
                self._refuse(exp, self.site.fit_problem(cfg)
                             or f"the scheduler refused the job array: {e}")
            return chunks
        self._submitted()
        self.journal.record(exp.id, ArraySubmitted(job_id=job_id, **entry))
        return [*chunks, (job_id, chunk.offset, chunk.count)]

    def refuse_never_running(self, now: float | None = None) -> None:
        """An experiment whose job the scheduler took but says it can never start (PBS
        accepts such a job and leaves it queued for good) stops with the scheduler's reason,
        as a refused submission does, once the scheduler has said so for NEVER_RUNS_GRACE
        seconds; stopping it cancels the job. The grace: PBS says it of a job that needs more
        nodes than are up, and ran it once a MOM came back (measured, OpenPBS 23.06)."""
        now = time.time() if now is None else now
        never = {job for job, status in self.jobs.statuses.items() if status.never_runs}
        self.never_since = {job: self.never_since.get(job, now) for job in never}
        due = {job for job, since in self.never_since.items()
               if now - since >= NEVER_RUNS_GRACE}
        if not due:
            return
        refused: dict[int, str] = {}
        for exp_id, job_id in self.store.live_jobs():
            if job_id in due and exp_id not in refused:
                refused[exp_id] = job_id
        for exp_id, job_id in sorted(refused.items()):
            exp = self.store.experiment(exp_id)
            if exp.error:
                continue
            reason = self.jobs.statuses[job_id].reason
            self._refuse(exp, f"the scheduler can never start job {job_id} as asked ({reason}):"
                              " ask for fewer slots or nodes, or another resource pool")

    def _refuse(self, exp: Experiment, message: str) -> None:
        """The scheduler refused the search's array: the experiment stops with its reason."""
        log.warning("experiment %d: %s", exp.id, message)
        self.journal.record(exp.id, ExperimentErrorSet(message=message))

    def _held(self, e: SchedulerCommandError | ValueError) -> bool:
        """Whether the scheduler refused a submission only for now; if so, submissions are
        held, then the next is tried."""
        if not isinstance(e, SchedulerCommandError) or not e.transient:
            return False
        self.hold_seconds = min(HOLD_MAX_SECONDS, 2 * self.hold_seconds or HOLD_FIRST_SECONDS)
        self.held_until = time.time() + self.hold_seconds
        self.held_reason = str(e)
        self.unsettled = True
        log.warning("the scheduler refused a submission for now (%s); submissions wait "
                    "%.0f s, then it is tried again", e, self.hold_seconds)
        return True

    def _laid_out_anew(self, e: SchedulerCommandError | ValueError, cfg: ExperimentConfig,
                       placed: Placement) -> bool:
        """Whether the scheduler refused a job for nodes or a partition the site no longer
        (or not yet) has, and the site read again lays it out otherwise; if so, the caller
        sends it again as laid out now."""
        if not (isinstance(e, SchedulerCommandError)
                and self.scheduler.refusal_means_site_changed(f"{e.stderr}\n{e.stdout}")):
            return False
        self.site.stale()
        if self.site.placement(cfg) == placed:
            return False
        log.warning("the scheduler refused a job laid out for what the site offered before "
                    "(%s); it goes again as the site is now", e)
        return True

    def _submitted(self) -> None:
        if self.hold_seconds:
            log.info("the scheduler takes submissions again")
        self.hold_seconds, self.held_reason = 0.0, ""

    def _may_submit(self) -> bool:
        now = time.time()
        if now < self.held_until:
            return False
        while self.submissions and now - self.submissions[0] > 60:
            self.submissions.popleft()
        return len(self.submissions) < max(1, int(self.cluster.submissions_per_minute))

    def _prepare(self, exp: Experiment, trial: Trial) -> tuple[Path, Placement] | None:
        """Write the trial's next run directory (its run spec and batch script); the
        directory and how the run lays over the nodes, or None when the site cannot run the
        experiment, which ends the trial."""
        cfg = self.configs.get(exp)
        options, placed = self.scheduler.options(cfg), self.site.placement(cfg)
        problem = self.site.fit_problem(cfg, placed)
        if problem is not None:
            # Slurm would accept some of these and leave them pending forever.
            self.journal.record(exp.id, TrialStateChanged(
                trial_id=trial.id, state=TrialState.ERROR, restarts=trial.restarts,
                reason=problem))
            return None
        record = {
            "id": trial.id, "trial_seed": trial.trial_seed,
            "hparams": trial.hparams,
            "latest_checkpoint": trial.latest_checkpoint or cfg.searcher.source_checkpoint_uuid,
            "steps_completed": trial.steps_completed,
            "metadata": trial.metadata,
        }
        spec = run_spec(cfg, self.paths, exp.id, record, trial.run_id + 1, options, placed,
                        self.cluster, exp.task)
        run_dir = Path(spec.run_dir)
        if run_dir.exists():
            shutil.rmtree(run_dir)  # left by a submission that never reached the scheduler
        run_dir.mkdir(parents=True)
        cfg.checkpoint_dir(self.paths.default_checkpoints()).mkdir(parents=True, exist_ok=True)
        spec.save(run_dir)
        script = run_dir / layout.SCRIPT_FILE
        script.write_text(self.scheduler.render_script(job_request(
            spec, cfg, self.cluster, options, placed,
            nice_for(exp.priority, self.scheduler.nice_per_step))))
        return run_dir, placed

    def _submitting(self, exp: Experiment, trials: list[Trial]) -> None:
        """Journal the trials' next runs as submitting, and write their control files (the
        trial reads its own at start)."""
        self.journal.record_all(exp.id, [
            RunSubmitting(trial_id=t.id, run_id=t.run_id + 1, first_op=t.ops_completed)
            for t in trials])
        for live in self.store.live_runs([(t.id, t.run_id + 1) for t in trials]):
            self.controls.sync(live)

    def _submit(self, exp: Experiment, trial: Trial) -> None:
        """Submit the trial's next run as a job."""
        prepared = self._prepare(exp, trial)
        if prepared is None:
            return
        run_dir, placed = prepared
        run_id = trial.run_id + 1
        self._submitting(exp, [trial])
        submitting = self.store.run(trial.id, run_id)
        self.submissions.append(time.time())
        try:
            job_id = self.jobs.submit(run_dir / layout.SCRIPT_FILE)
        except (SchedulerCommandError, ValueError) as e:
            if self._held(e):  # left submitting: settle() adopts its job or queues it again
                return
            if submitting is not None and self._laid_out_anew(e, self.configs.get(exp), placed):
                # Queued again now, not left to settle(): Slurm keeps the refused job's id in
                # its accounting, under the run's name, and settle() would adopt it.
                self.journal.run_ended(exp.id, submitting, Decision(
                    TrialState.QUEUED, trial.restarts, ""), job_state=JobState.CANCELED,
                    outcome="never submitted: laid out again for the site as it is now")
                return
            if submitting is not None:
                problem = self.site.fit_problem(self.configs.get(exp))
                reason = problem or f"submission refused: {e}"
                decision = Decision(TrialState.ERROR, trial.restarts, reason)
                self.journal.run_ended(exp.id, submitting, decision, job_state=JobState.FAILED,
                                       outcome=reason)
            return
        self._submitted()
        self.journal.record(exp.id, RunSubmitted(trial_id=trial.id, run_id=run_id,
                                                 job_id=job_id))

    def _fill_slots(self, exp: Experiment, tasks: list[tuple[Trial, tuple[str, int]]]) -> None:
        """Hand the trials' first runs to their array tasks (``_fill_slot``), the runs of all
        of them journaled as submitting in one append and as submitted in another."""
        ready = [(t, 1, prepared[0], task) for t, task in tasks
                 if (prepared := self._prepare(exp, t)) is not None]
        if not ready:
            return
        self._submitting(exp, [t for t, _, _, _ in ready])
        self._fill_slot(exp.id, ready)

    def _fill_slot(
        self, exp_id: int, handed: list[tuple[Trial, int, Path, tuple[str, int]]]
    ) -> None:
        """Hand each (trial, run id, run directory) to its array task, which waits for the slot
        file to name its directory; the runs are journaled as submitted in one append."""
        exp_dir = self.paths.experiment(exp_id)
        for trial, _, run_dir, _ in handed:
            write_text_atomic(layout.array_slot(exp_dir, trial.request_id), str(run_dir))
        self.journal.record_all(exp_id, [
            RunSubmitted(trial_id=t.id, run_id=run_id,
                         job_id=self.scheduler.array_task_id(*task))
            for t, run_id, _, task in handed])

    def settle(self) -> None:
        """Arrays and runs journaled as submitting with no job id: the daemon died around their
        submission, or the scheduler refused it for now (``_held``).

        Call only with statuses fresh from a successful query: a job that is not among them
        was never submitted. Each is adopted if the scheduler has it, else submitted again.
        """
        self.unsettled = False
        for exp in self.store.experiments(unfinished=True):
            with self.guard(exp.id, "settling submissions"):
                self._settle_arrays(exp)
        for run in self.store.runs(live_only=True):
            if run.state == RunState.SUBMITTING:
                with self.guard(self.store.trial(run.trial_id).experiment_id,
                                "settling submissions", (run.trial_id, run.run_id)):
                    self._adopt_or_requeue(run)
        # What a passing I/O error held up (Guard) is settled at the next poll.
        if any(f.step == "settling submissions" for f in self.guard.faults.values()):
            self.unsettled = True

    def _settle_arrays(self, exp: Experiment) -> None:
        for array in self.store.arrays(exp.id, submitted=False):
            if array.job_id:
                continue
            job_id = self.jobs.find(array_job_name(exp.id, array.index),
                                  layout.array_dir(self.paths.experiment(exp.id)))
            if job_id:
                log.info("experiment %d: adopted job array %s", exp.id, job_id)
                self.journal.record(exp.id, ArraySubmitted(
                    job_id=self.scheduler.array_of(job_id), index=array.index,
                    offset=array.offset, count=array.count, throttle=array.throttle))
            else:
                self.journal.record(exp.id, ArrayAbandoned(index=array.index))

    def _adopt_or_requeue(self, run: Run) -> None:
        trial = self.store.trial(run.trial_id)
        exp_id = trial.experiment_id
        run_dir = self.paths.run(exp_id, trial.id, run.run_id)
        if run.run_id == 1:
            chunks = [(a.job_id, a.offset, a.count) for a in self.store.arrays(exp_id)]
            array_task = owner(trial.request_id, chunks)
            if array_task is not None:
                # again: idempotent
                self._fill_slot(exp_id, [(trial, run.run_id, run_dir, array_task)])
                return
        exit_info = read_json(run_dir / EXIT_FILE)
        if exit_info and exit_info.get("job_id"):
            job_id = str(exit_info["job_id"])
        else:
            job_id = self.jobs.find(run_job_name(exp_id, trial.id, run.run_id), run_dir)
        if job_id:
            self.journal.record(exp_id, RunSubmitted(trial_id=trial.id, run_id=run.run_id,
                                                     job_id=job_id))
            return
        self.journal.run_ended(exp_id, run, Decision(TrialState.QUEUED, trial.restarts, ""),
                               job_state=JobState.CANCELED, outcome="never submitted")
