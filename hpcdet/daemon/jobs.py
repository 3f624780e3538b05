"""The daemon's word with the scheduler about jobs: one status query for all of them, what
became of runs the scheduler no longer lists, submission and cancellation."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from pathlib import Path

from hpcdet.errors import SchedulerCommandError
from hpcdet.rundir.atomic import write_text_atomic
from hpcdet.rundir.layout import KILL_FILE, packed_run, pilot_of
from hpcdet.schedulers import JobStatus, Scheduler
from hpcdet.schedulers.runner import CommandRunner, Result
from hpcdet.states import JobState, RunState
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)

# Polls in a row a job may be missing from the scheduler's answer before its run counts as gone.
MISSING_POLLS_BEFORE_VANISHED = 2
# Jobs one cancel command names at most: a kill of a thousand trials is two commands, not a
# thousand, and no command line grows past what the system takes.
CANCEL_BATCH = 500
# Seconds between polls at most while the scheduler does not answer: once it is back, the
# daemon learns it within this.
MAX_BACKOFF = 60.0


class Jobs:
    def __init__(self, scheduler: Scheduler, runner: CommandRunner, store: Store,
                 poll_interval: float) -> None:
        self.scheduler = scheduler
        self.runner = runner
        self.store = store
        self.poll_interval = poll_interval
        self.statuses: dict[str, JobStatus] = {}
        self.missing: dict[str, int] = {}  # job -> polls in a row it was not listed
        self.canceled: set[str] = set()  # asked once; a cancel is not repeated every tick
        self.last_poll = 0.0
        self.polls = 0
        # Since when the scheduler has not answered a poll (slurmctld or the PBS server down,
        # munge restarting), how many in a row, and its last words; daemon status says so.
        self.unreachable_since: float | None = None
        self.failed_polls = 0
        self.unreachable_error = ""
        # Jobs polled though no run names them: pilot allocations (hpcdet.daemon.packing).
        self.watched: set[str] = set()
        # A run's directory (hpcdet.paths.StatePaths.run), where a cancel marks the run killed.
        self.run_dir: Callable[[int, int, int], Path] | None = None
        # The accounting answers since the last poll, and the arrays (or jobs) they were asked
        # for: the tasks of an array that end in one sweep cost one query, not one each.
        self.accounted: dict[str, JobStatus] = {}
        self.accounted_for: set[str] = set()

    def poll(self) -> bool:
        """One status query for all of the user's live jobs, and what it says stored in their
        runs; False if the scheduler did not answer."""
        self.last_poll = time.time()
        live = self.store.live_job_ids()
        # A packed run is asked of as its pilot's job (``<pilot>+<E>.<T>.<R>``).
        pilots = {job_id: pilot for job_id in live if (pilot := pilot_of(job_id))}
        asked = sorted({pilots.get(j, j) for j in live} | self.watched)
        try:
            result = self._ask(self.scheduler.status_command(asked))
        except SchedulerCommandError as e:
            return self._unanswered("scheduler status query failed", e)
        try:
            statuses = self.scheduler.parse_status(result.stdout)
        except ValueError as e:
            # An answer that cannot be read says nothing: no job counts as gone.
            return self._unanswered("could not read the scheduler's status answer", e)
        if self.unreachable_since is not None:
            log.info("the scheduler answers again, after %.0f s and %d failed polls",
                     self.last_poll - self.unreachable_since, self.failed_polls)
            self.unreachable_since, self.failed_polls, self.unreachable_error = None, 0, ""
        self.polls += 1
        self.statuses = statuses
        self.accounted, self.accounted_for = {}, set()
        gone = [j for j in asked if j not in self.statuses]
        final_cmd = self.scheduler.final_status_command(gone)
        if final_cmd is not None:
            try:
                out = self._ask(final_cmd).stdout
                self.statuses.update(self.scheduler.parse_final_status(out))
            except SchedulerCommandError as e:
                log.warning("accounting query failed: %s", e)
        for job_id, pilot in pilots.items():
            if pilot in self.statuses:
                self.statuses[job_id] = self.statuses[pilot]
        for job_id in [*live, *self.watched]:
            self.missing[job_id] = 0 if job_id in self.statuses else self.missing.get(job_id, 0) + 1
        self.watched = {j for j in self.watched if not self.ended(j)}
        # A state the backend cannot name says nothing: the run keeps its last one and stays
        # live (stored as UNKNOWN, it would drop out of the live runs for good).
        self.store.set_run_states({
            job_id: (RunState(status.state.value), status.reason)
            for job_id in live if (status := self.statuses.get(job_id)) is not None
            and status.state in (JobState.PENDING, JobState.RUNNING)})
        return True

    def _unanswered(self, what: str, e: Exception) -> bool:
        """A poll the scheduler did not answer: nothing is concluded of any job (a run whose
        job ended meanwhile ends by its exit file), and polls back off, doubling up to
        MAX_BACKOFF seconds apart."""
        if self.unreachable_since is None:
            self.unreachable_since = self.last_poll
        self.failed_polls += 1
        self.unreachable_error = f"{what}: {e}"[:500]
        self.last_poll += min(MAX_BACKOFF, self.poll_interval * (2 ** min(self.failed_polls,
                                                                          8) - 1))
        log.warning("%s (%d in a row): %s", what, self.failed_polls, e)
        return False

    def _ask(self, cmd: list[str]) -> Result:
        result = self.runner.run(cmd, check=False)
        if not self.scheduler.answered(result.exit_code, result.stderr):
            raise SchedulerCommandError(cmd, result.exit_code, result.stdout, result.stderr)
        return result

    def vanished(self, job_id: str) -> bool:
        """Whether the scheduler has stopped listing the job for good."""
        return self.missing.get(job_id, 0) >= MISSING_POLLS_BEFORE_VANISHED

    def ended(self, job_id: str) -> bool:
        """Whether the last poll says the job has ended: a final state, or gone for good."""
        status = self.statuses.get(job_id)
        return bool(status and status.state.is_final) or self.vanished(job_id)

    def submit(self, script: Path) -> str:
        """Submit a batch script from its own directory, the job's working directory (PBS
        records qsub's as PBS_O_WORKDIR, which ``find`` compares); its job id. Raises
        SchedulerCommandError (``transient`` if the scheduler may take it later) or ValueError."""
        try:
            done = self.runner.run(self.scheduler.submit_command(script), cwd=script.parent)
        except SchedulerCommandError as e:
            said = e.stderr + e.stdout
            e.transient = e.transient or self.scheduler.refusal_is_transient(said)
            advice = self.scheduler.advice_for(said)
            if advice:
                e.args = (f"{e.args[0]}; {advice}",)
            raise
        return self.scheduler.parse_job_id(done.stdout)

    def usage(self, job_id: str) -> tuple[JobStatus, str] | None:
        """The scheduler's account of an ended job (its elapsed seconds, GPUs and CPUs) and
        the command that gave it: the last poll's, when that holds one of a final state
        (PBS's qstat), or else an accounting query (Slurm's sacct; none where the site keeps
        no accounting), one per array and poll. None where the scheduler says nothing, and
        for a packed run, whose job is its pilot's and held other trials too."""
        if pilot_of(job_id):
            return None
        polled = self.statuses.get(job_id)
        if polled is not None and polled.used_seconds is not None and polled.state.is_final:
            return polled, self.scheduler.status_command([job_id])[0]
        whole = self.scheduler.array_of(job_id)  # its array's other tasks are asked with it
        cmd = self.scheduler.final_status_command([whole])
        if cmd is not None:
            if whole not in self.accounted_for:
                self.accounted_for.add(whole)
                try:
                    self.accounted.update(self.scheduler.parse_final_status(self._ask(cmd).stdout))
                except (SchedulerCommandError, ValueError) as e:
                    log.warning("accounting query for job %s failed: %s", whole, e)
            found = self.accounted.get(job_id)
            if found is not None and found.used_seconds is not None:
                return found, cmd[0]
        if polled is not None and polled.used_seconds is not None:
            return polled, self.scheduler.status_command([job_id])[0]
        return None

    def cancel(self, job_ids: Collection[str]) -> None:
        """Cancel the jobs, a command per CANCEL_BATCH of them; a job asked before, or a task
        of an array asked before, is not asked again."""
        self._mark_killed(job_ids)
        packed = {j for j in job_ids if packed_run(j)}  # their pilots end them
        job_ids = sorted({j for j in job_ids if j not in self.canceled and j not in packed
                          and self.scheduler.array_of(j) not in self.canceled})
        for i in range(0, len(job_ids), CANCEL_BATCH):
            batch = job_ids[i:i + CANCEL_BATCH]
            self.canceled.update(batch)
            try:
                self.runner.run(self.scheduler.cancel_command(batch))
            except SchedulerCommandError as e:
                if self.scheduler.nothing_to_cancel(e.exit_code, e.stderr):
                    continue  # those had already ended
                self.canceled.difference_update(batch)  # asked again by whoever still wants it
                log.warning("cancel of %s failed: %s", batch, e)

    def _mark_killed(self, job_ids: Collection[str]) -> None:
        """``RUN_DIR/kill`` in each run of the jobs (or of their arrays): the SIGTERM the cancel
        brings then ends the trial at once, where a scheduler's SIGTERM alone (a preemption, a
        qdel) asks it to checkpoint first (hpcdet.core._preempt); a packed run's pilot ends it."""
        if self.run_dir is None:
            return
        asked = set(job_ids)
        for exp_id, trial_id, run_id, job_id in self.store.live_run_jobs():
            if job_id in asked or self.scheduler.array_of(job_id) in asked:
                run_dir = self.run_dir(exp_id, trial_id, run_id)
                if run_dir.is_dir():
                    write_text_atomic(run_dir / KILL_FILE, "")

    def find(self, name: str, workdir: Path) -> str:
        """The id of the user's job of that name started in ``workdir``, or "", from the last
        status query.

        The directory tells apart jobs of the same name from other hpcdet state directories.
        """
        for job_id, status in self.statuses.items():
            if status.name == name and (not status.workdir or status.workdir == str(workdir)):
                return job_id
        return ""
