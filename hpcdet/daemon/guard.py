"""One experiment's failure stays that experiment's: each step of the loop is guarded per
experiment, and an experiment whose step fails ends in ERROR while the others go on."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from hpcdet.daemon.finishing import Finisher
from hpcdet.daemon.jobs import Jobs
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.searching import SearchDriver
from hpcdet.errors import StoreError, disk_full_cause
from hpcdet.states import FINAL_EXPERIMENT_STATES, ExperimentState
from hpcdet.store.models import Run
from hpcdet.store.reads import LiveRun
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)

R = TypeVar("R", Run, LiveRun)

# An experiment whose steps keep failing with an I/O error ends in ERROR once the errors have
# gone on for this many rounds in a row and this long; shorter trouble is retried.
IO_RETRY_ROUNDS = 5
IO_RETRY_SECONDS = 120.0


class Guard:
    def __init__(self, store: Store, journal: Journal, search: SearchDriver, jobs: Jobs,
                 finisher: Finisher) -> None:
        self.store = store
        self.journal = journal
        self.search = search
        self.jobs = jobs
        self.finisher = finisher
        self.rounds = 0  # reconciles and ticks begun
        # experiment -> (last round, rounds in a row, since when) its steps failed with OSError
        self.io_failures: dict[int, tuple[int, int, float]] = {}
        self.io_retry_rounds = IO_RETRY_ROUNDS
        self.io_retry_seconds = IO_RETRY_SECONDS

    def new_round(self) -> None:
        self.rounds += 1

    @contextmanager
    def __call__(self, exp_id: int, step: str) -> Iterator[None]:
        """One experiment's part of a step: if it fails, that experiment ends in ERROR with
        the reason, and the step goes on for the others.

        A database error or a full disk is the daemon's, not the experiment's: it propagates
        to the loop's back-off, and the step is tried again once the cause is gone. So does
        any other I/O error (an NFS server that stalls or restarts) until it has lasted
        ``io_retry_rounds`` rounds and ``io_retry_seconds``: then it is the experiment's, which
        must not hold up the others for ever.
        """
        try:
            yield
        except Exception as e:
            if not self._contain(exp_id, step, e):
                raise

    def each_run(self, step: str, fn: Callable[[R], None], runs: Sequence[R]) -> None:
        """``fn`` for each run, guarded by the run's experiment (as ``__call__``; written out,
        as a context manager per run costs the loop more than most runs' step)."""
        for run in runs:
            try:
                fn(run)
            except Exception as e:
                if not self._contain(self.store.experiment_of(run.trial_id), step, e):
                    raise

    def _contain(self, exp_id: int, step: str, e: Exception) -> bool:
        """Whether the experiment's step's failure ``e`` is the experiment's, which then ends
        in ERROR; False if it is the daemon's, to be raised to the loop."""
        if isinstance(e, StoreError) or disk_full_cause(e) is not None:
            return False
        if isinstance(e, OSError) and self._retry_io(exp_id):
            log.warning("experiment %d: %s failed; retried next round: %s", exp_id, step, e)
            return False
        log.exception("experiment %d: %s failed", exp_id, step)
        self.fail(exp_id, f"{step} failed: {e.__class__.__name__}: {e}")
        return True

    def _retry_io(self, exp_id: int) -> bool:
        """Whether an I/O error of this experiment's, in this round, is still retried."""
        last, count, since = self.io_failures.get(exp_id, (-1, 0, time.time()))
        if last < self.rounds - 1:  # the last trouble passed: this is a new one
            count, since = 0, time.time()
        if last != self.rounds:
            count += 1
        self.io_failures[exp_id] = (self.rounds, count, since)
        return count < self.io_retry_rounds or time.time() - since < self.io_retry_seconds

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
                self.journal.record(exp_id, "experiment_failed",
                                    message=f"{exp.error}; stopping it failed too: {message}")
            else:
                self.journal.record(exp_id, "experiment_state",
                                    state=ExperimentState.STOPPING_ERROR, cascade=True,
                                    reason=message, error=message)
            self.search.forget(exp_id)
            self.jobs.cancel(jobs + [a.job_id for a in self.store.arrays(exp_id)])
            exp = self.store.experiment(exp_id)
            if exp.state not in FINAL_EXPERIMENT_STATES:
                self.finisher.finish(exp)  # ends it at once if nothing runs
        except StoreError:
            raise
        except Exception:
            log.exception("experiment %d: could not record its failure", exp_id)
