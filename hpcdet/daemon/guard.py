"""One experiment's failure stays that experiment's: each step of the loop is guarded per
experiment, and an experiment whose step fails ends in ERROR while the others go on."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from hpcdet.daemon.finishing import Finisher
from hpcdet.daemon.jobs import Jobs
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.searching import SearchDriver
from hpcdet.errors import StoreError, disk_full_cause
from hpcdet.records import LiveRun
from hpcdet.records import RunRecord as Run
from hpcdet.states import FINAL_EXPERIMENT_STATES, ExperimentState
from hpcdet.store.entries import ExperimentFailed, ExperimentStateChanged
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)

R = TypeVar("R", Run, LiveRun)

# An I/O error in one experiment's step (one run's files: an unreadable event log, a control
# file that cannot be written, an NFS server that stalls) skips that step for that experiment
# (or run) for the round, and the step is tried again the next; once the same error has gone
# on for this many rounds and this long, the experiment ends in ERROR with the reason.
IO_RETRY_ROUNDS = 5
IO_RETRY_SECONDS = 120.0


@dataclass
class Fault:
    """An I/O error of one experiment's step, retried every round until it passes or lasts
    (IO_RETRY_ROUNDS and IO_RETRY_SECONDS). Shown by `daemon status` and `experiment
    describe` through the daemon's status file; it is no decision, so it is not journaled."""

    experiment_id: int
    step: str
    run: tuple[int, int] | None  # (trial, run) when the step was one run's
    path: str  # the file it named, if any
    error: str
    since: float
    rounds: int = 0  # rounds it happened in
    last_round: int = -1
    last_seen: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        trial_id, run_id = self.run or (None, None)
        return {"experiment_id": self.experiment_id, "step": self.step, "trial_id": trial_id,
                "run_id": run_id, "path": self.path, "error": self.error, "since": self.since,
                "rounds": self.rounds}


class Guard:
    def __init__(self, store: Store, journal: Journal, search: SearchDriver, jobs: Jobs,
                 finisher: Finisher) -> None:
        self.store = store
        self.journal = journal
        self.search = search
        self.jobs = jobs
        self.finisher = finisher
        self.rounds = 0  # reconciles and ticks begun
        # (step, experiment, trial, run; 0, 0 for an experiment's step) -> its I/O error
        self.faults: dict[tuple[str, int, int, int], Fault] = {}
        self.io_retry_rounds = IO_RETRY_ROUNDS
        self.io_retry_seconds = IO_RETRY_SECONDS

    def new_round(self) -> None:
        self.rounds += 1
        if self.faults:
            # A fault whose step has not come round again (its run ended another way) is
            # forgotten once it has been gone as long as it would have had to last.
            now = time.time()
            for key, fault in list(self.faults.items()):
                if (self.rounds - fault.last_round > self.io_retry_rounds
                        and now - fault.last_seen > self.io_retry_seconds):
                    del self.faults[key]

    @contextmanager
    def __call__(self, exp_id: int, step: str, run: tuple[int, int] | None = None,
                 deferrable: bool = True) -> Iterator[None]:
        """One experiment's part of a step (``run``: one run's): if it fails, that experiment
        ends in ERROR with the reason, and the step goes on for the others.

        A database error or a full disk is the daemon's, not the experiment's: it propagates
        to the loop's back-off, and the step is tried again once the cause is gone. Any other
        I/O error (an unreadable run directory, an NFS server that stalls or restarts) is a
        ``Fault``: the experiment's part of the step is skipped for this round and tried again
        the next, while the others go on, until the error has lasted ``io_retry_rounds`` rounds
        and ``io_retry_seconds``: then it ends the experiment. ``deferrable=False``: the step
        is not tried again next round (starting a search), so a fault is raised to the caller,
        which retries it (the loop's start) or gives up (a create).
        """
        try:
            yield
        except Exception as e:
            if not self._contain(exp_id, step, e, run, deferrable):
                raise
        else:
            if self.faults:
                self._passed((step, exp_id, *(run or (0, 0))))

    def each_run(self, step: str, fn: Callable[[R], None], runs: Sequence[R]) -> None:
        """``fn`` for each run, guarded by the run's experiment (as ``__call__``; written out,
        as a context manager per run costs the loop more than most runs' step)."""
        for run in runs:
            try:
                fn(run)
            except Exception as e:
                if not self._contain(self.store.experiment_of(run.trial_id), step, e,
                                     (run.trial_id, run.run_id)):
                    raise
            else:
                if self.faults:
                    self._passed((step, self.store.experiment_of(run.trial_id), run.trial_id,
                                  run.run_id))

    def current_faults(self) -> list[Fault]:
        """The faults retried now, oldest first."""
        return sorted(self.faults.values(), key=lambda f: (f.since, f.experiment_id))

    def _passed(self, key: tuple[str, int, int, int]) -> None:
        """The step ``key`` went through: its fault has passed, unless it failed this round."""
        fault = self.faults.get(key)
        if fault is not None and fault.last_round != self.rounds:
            log.info("experiment %d: %s works again", fault.experiment_id, fault.step)
            del self.faults[key]

    def _contain(self, exp_id: int, step: str, e: Exception, run: tuple[int, int] | None,
                 deferrable: bool = True) -> bool:
        """Whether the experiment's step's failure ``e`` stays the experiment's (retried next
        round, or it ends in ERROR); False if it is the daemon's, to be raised to the loop."""
        if isinstance(e, StoreError) or disk_full_cause(e) is not None:
            return False
        if isinstance(e, OSError) and self._retry_io(exp_id, step, run, e):
            return deferrable
        log.exception("experiment %d: %s failed", exp_id, step)
        self.fail(exp_id, f"{step} failed: {e.__class__.__name__}: {e}")
        return True

    def _retry_io(self, exp_id: int, step: str, run: tuple[int, int] | None,
                  e: OSError) -> bool:
        """Whether this I/O error of the experiment's step is still retried (``Fault``)."""
        now = time.time()
        key = (step, exp_id, *(run or (0, 0)))
        fault = self.faults.get(key)
        if fault is None:
            fault = self.faults[key] = Fault(exp_id, step, run, "", "", now)
            log.warning("experiment %d: %s failed%s; retried every round: %s", exp_id, step,
                        f" for run {run[0]}.{run[1]}" if run else "", e)
        if fault.last_round != self.rounds:
            fault.rounds += 1
            fault.last_round = self.rounds
        fault.last_seen = now
        fault.path = str(e.filename or "")
        fault.error = f"{e.__class__.__name__}: {e}"
        # Kept once it has lasted: while its experiment stops, it fails that at once too.
        return fault.rounds < self.io_retry_rounds or now - fault.since < self.io_retry_seconds

    def fail(self, exp_id: int, message: str) -> None:
        """End the experiment in ERROR: one decision, STOPPING_ERROR with the reason, and the
        usual stopping from there (its runs canceled or preempted every round, again after a
        restart, until they have ended; the finisher then makes it ERROR).

        If stopping fails too (a stored config that no longer loads, say), it ends at once:
        its live runs are marked canceled and their jobs asked to cancel one last time.
        """
        try:
            self.journal.replay(exp_id)  # it may be what failed, before its experiment's row
            exp = self.store.experiment(exp_id)
            if exp.state in FINAL_EXPERIMENT_STATES:
                return
            trial_ids = [t.id for t in self.store.trials(exp_id)]
            jobs = [r.job_id for r in self.store.runs(trial_ids, live_only=True) if r.job_id]
            if exp.state == ExperimentState.STOPPING_ERROR:
                self.journal.record(exp_id, ExperimentFailed(
                    message=f"{exp.error}; stopping it failed too: {message}"))
            else:
                self.journal.record(exp_id, ExperimentStateChanged(
                    state=ExperimentState.STOPPING_ERROR, cascade=True, reason=message,
                    error=message))
            self.search.forget(exp_id)
            self.jobs.cancel(jobs + [a.job_id for a in self.store.arrays(exp_id)])
            exp = self.store.experiment(exp_id)
            if exp.state not in FINAL_EXPERIMENT_STATES:
                self.finisher.finish(exp)  # ends it at once if nothing runs
        except StoreError:
            raise
        except Exception:
            log.exception("experiment %d: could not record its failure", exp_id)
