"""Every state hpcdet keeps, as types, and the pure rules that move between them.

Experiment states follow Determined: ACTIVE, PAUSED, STOPPING_CANCELED (kill or cancel asked,
jobs still ending), STOPPING_ERROR (the search failed), and the final COMPLETED, CANCELED,
ERROR. Trial states: QUEUED (in hpcdet's own queue, no job yet), ACTIVE (a job exists),
PAUSED, WAITING (0.37 ASHA: out of operations, not promoted yet, no job), and the final
COMPLETED, CANCELED, ERROR. A run is SUBMITTING until the scheduler names its job, then in
its job's state (``JobState``, the scheduler's answer normalised by each backend).

Each state is a ``str`` whose value is its name: the database, the journals, the event logs
and ``--json`` hold exactly these strings, and a string read back from any of them compares
equal to its member (``"ACTIVE" == TrialState.ACTIVE``), so stored rows need no conversion.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


class _State(str, enum.Enum):
    """A state that prints as its value, in every Python (3.11 changed ``format`` of mixins)."""

    def __str__(self) -> str:
        return str.__str__(self)


class ExperimentState(_State):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    STOPPING_CANCELED = "STOPPING_CANCELED"
    STOPPING_ERROR = "STOPPING_ERROR"
    COMPLETED = "COMPLETED"
    CANCELED = "CANCELED"
    ERROR = "ERROR"


class TrialState(_State):
    QUEUED = "QUEUED"
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    WAITING = "WAITING"
    COMPLETED = "COMPLETED"
    CANCELED = "CANCELED"
    ERROR = "ERROR"


class JobState(_State):
    """Normalised job states; ``is_final`` ones never change again."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"  # the batch script ended; exit.json says how the trial did
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    TIMEOUT = "TIMEOUT"
    PREEMPTED = "PREEMPTED"
    NODE_FAIL = "NODE_FAIL"
    UNKNOWN = "UNKNOWN"

    @property
    def is_final(self) -> bool:
        return self not in (JobState.PENDING, JobState.RUNNING, JobState.UNKNOWN)


class RunState(_State):
    """SUBMITTING, then the state of the run's job (the members of ``JobState``)."""

    SUBMITTING = "SUBMITTING"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    TIMEOUT = "TIMEOUT"
    PREEMPTED = "PREEMPTED"
    NODE_FAIL = "NODE_FAIL"
    UNKNOWN = "UNKNOWN"


class CheckpointState(_State):
    COMPLETED = "COMPLETED"
    DELETED = "DELETED"


class QueueState(_State):
    """An experiment in the job queue, as Determined shows it."""

    QUEUED = "QUEUED"  # waiting
    SCHEDULED = "SCHEDULED"  # holds resources


FINAL_TRIAL_STATES = frozenset({TrialState.COMPLETED, TrialState.CANCELED, TrialState.ERROR})
IDLE_TRIAL_STATES = frozenset(  # not final, and no job
    {TrialState.QUEUED, TrialState.PAUSED, TrialState.WAITING})
# Trials of an experiment in hpcdet's job queue: with a job, or waiting for one.
QUEUED_TRIAL_STATES = frozenset({TrialState.ACTIVE, TrialState.QUEUED})

FINAL_EXPERIMENT_STATES = frozenset(
    {ExperimentState.COMPLETED, ExperimentState.CANCELED, ExperimentState.ERROR})
STOPPING_STATES = frozenset({ExperimentState.STOPPING_CANCELED, ExperimentState.STOPPING_ERROR})
# Neither stopping nor final: its search goes on, and it has a place in hpcdet's job queue.
RUNNING_EXPERIMENT_STATES = frozenset({ExperimentState.ACTIVE, ExperimentState.PAUSED})
UNFINISHED_EXPERIMENT_STATES = RUNNING_EXPERIMENT_STATES | STOPPING_STATES

LIVE_RUN_STATES = frozenset({RunState.SUBMITTING, RunState.PENDING, RunState.RUNNING})
# Live runs whose job the scheduler knows.
SUBMITTED_RUN_STATES = frozenset({RunState.PENDING, RunState.RUNNING})

# Ends that the cluster caused: they resume from the latest checkpoint without using up
# max_restarts.
_CLUSTER_ENDS = {
    JobState.TIMEOUT: "timed out",
    JobState.PREEMPTED: "preempted by the scheduler",
    JobState.NODE_FAIL: "node failure",
}


SILENT_EXIT = "exited 0 without reporting any metrics, checkpoints or searcher progress"


@dataclass(frozen=True)
class RunEnd:
    """What is known when a job has ended."""

    exit_code: int | None  # from exit.json; None when the batch script never finished
    job_state: JobState  # the scheduler's final word (COMPLETED if it said nothing)
    preempt_acked: bool
    trial_killed: bool
    stop_requested: bool = False  # the searcher stopped the trial (0.38)
    completed_ops: bool = False  # the run completed searcher operations (0.37)
    closed: bool = False  # the searcher has closed the trial
    pending_ops: bool = False  # the searcher has issued an operation not run yet
    reported: bool = True  # the trial wrote any event (metrics, checkpoint, progress, ...)
    hook_failed: int | None = None  # startup-hook.sh's exit code, when it failed
    # Why the trial could not start at all (no container runtime, no image, a failed pull):
    # nothing a restart mends, so the trial ends.
    launch_failed: str | None = None


@dataclass(frozen=True)
class Decision:
    trial_state: TrialState  # QUEUED means: submit again
    restarts: int
    reason: str


# An experiment in one of these states cancels a trial whose job ends.
_CANCELS_ITS_TRIALS = STOPPING_STATES | {ExperimentState.CANCELED}


def decide_run_end(
    end: RunEnd, experiment_state: str, restarts: int, max_restarts: int
) -> Decision:
    """How a trial goes on after its job ended (Determined's exit rules, spec §1.5)."""
    if end.trial_killed or experiment_state in _CANCELS_ITS_TRIALS:
        return Decision(TrialState.CANCELED, restarts, "canceled by the user")
    if end.stop_requested and (end.exit_code == 0 or end.job_state == JobState.CANCELED):
        return Decision(TrialState.COMPLETED, restarts, "stopped early by the searcher")
    paused = experiment_state == ExperimentState.PAUSED
    again = TrialState.PAUSED if paused else TrialState.QUEUED  # resumes when it may
    if end.exit_code == 0 and not end.preempt_acked:
        # 0.37: a trial that worked through operations and ran out waits for a promotion;
        # one that never completed an operation stopped by itself, and is done.
        if end.completed_ops and not end.closed:
            if end.pending_ops:
                return Decision(again, restarts, "promoted")
            return Decision(TrialState.WAITING, restarts,
                            "waiting for the searcher to promote it")
        # Determined completes it too; a trial that said nothing at all is worth a word.
        return Decision(TrialState.COMPLETED, restarts, "" if end.reported else SILENT_EXIT)
    if end.exit_code == 0 and end.preempt_acked:
        return Decision(again, restarts, "preempted")
    if end.job_state in _CLUSTER_ENDS:
        return Decision(again, restarts, _CLUSTER_ENDS[end.job_state])
    if end.job_state == JobState.CANCELED and paused:
        return Decision(TrialState.PAUSED, restarts, "paused before it started")
    if end.launch_failed:
        return Decision(TrialState.ERROR, restarts, end.launch_failed)
    reason = f"exited with code {end.exit_code}" if end.exit_code is not None else (
        f"job ended as {end.job_state.value} without an exit status"
    )
    if end.hook_failed is not None:
        reason = (f"startup-hook.sh failed with exit code {end.hook_failed} (its output is in "
                  "`hpcdet trial logs`)")
    if restarts + 1 > max_restarts:
        return Decision(TrialState.ERROR, restarts,
                        f"{reason}; max_restarts ({max_restarts}) used up")
    return Decision(again, restarts + 1, reason)


def experiment_end_state(trial_states: Sequence[str]) -> ExperimentState | None:
    """The experiment's final state once every trial is final, else None (spec §4)."""
    if not trial_states or any(s not in FINAL_TRIAL_STATES for s in trial_states):
        return None
    n = len(trial_states)
    if sum(s == TrialState.ERROR for s in trial_states) >= n:
        return ExperimentState.ERROR
    if sum(s == TrialState.CANCELED for s in trial_states) >= n:
        return ExperimentState.CANCELED
    return ExperimentState.COMPLETED


def experiment_final_state(
    experiment_state: str, searcher_done: bool, trial_states: Sequence[str]
) -> ExperimentState | None:
    """The state an unfinished experiment ends in now, or None while it goes on.

    An experiment stopped before its search created a trial ends too (canceled or failed).
    """
    if (experiment_state == ExperimentState.PAUSED
            or any(s not in FINAL_TRIAL_STATES for s in trial_states)):
        return None
    if experiment_state == ExperimentState.STOPPING_ERROR:
        return ExperimentState.ERROR
    if experiment_state == ExperimentState.STOPPING_CANCELED:
        return experiment_end_state(trial_states) or ExperimentState.CANCELED
    if not searcher_done:
        return None  # the searcher may still create trials
    return experiment_end_state(trial_states) or ExperimentState.COMPLETED


def idle_trials_follow(
    experiment_state: str,
) -> tuple[frozenset[TrialState], TrialState] | None:
    """(from which states, to which) an experiment's new state moves its trials without a job.

    Part of the same decision as the experiment's state: journaled and applied with it, so a
    daemon killed in between cannot leave queued trials in a stopped experiment.
    """
    if experiment_state == ExperimentState.PAUSED:
        return frozenset({TrialState.QUEUED}), TrialState.PAUSED
    if experiment_state == ExperimentState.ACTIVE:
        return frozenset({TrialState.PAUSED}), TrialState.QUEUED
    if experiment_state in STOPPING_STATES:
        return IDLE_TRIAL_STATES, TrialState.CANCELED
    return None


# What the journal's entries do to states besides the state they name (applied by
# store/journal_apply.py). Each returns the new state, or None where the state stays.

STOPPED_BEFORE_IT_RAN = "stopped by the searcher before it ran"


def ends(state: str) -> bool:
    """Whether an experiment or trial entering ``state`` ends (and gets its end time); one
    entering any other state has not ended, even if it had before (continued)."""
    return state in FINAL_EXPERIMENT_STATES or state in FINAL_TRIAL_STATES


def promoted(trial: str) -> TrialState | None:
    """0.37: an operation issued to a WAITING trial queues it again, to resume from its latest
    checkpoint."""
    return TrialState.QUEUED if trial == TrialState.WAITING else None


def closed(trial: str) -> TrialState | None:
    """0.37: a WAITING trial the searcher closes has nothing left to do."""
    return TrialState.COMPLETED if trial == TrialState.WAITING else None


def stopped_by_searcher(trial: str) -> TrialState | None:
    """0.38: a trial the searcher stops before it has a job is done; one with a job completes
    when its job ends (``decide_run_end``)."""
    return TrialState.COMPLETED if trial in IDLE_TRIAL_STATES else None


def job_named(run: str) -> RunState | None:
    """A SUBMITTING run whose job the scheduler named is PENDING; a later state stays."""
    return RunState.PENDING if run == RunState.SUBMITTING else None


def canceled_by_failure(run: str) -> RunState | None:
    """A live run of an experiment that fails at once is canceled."""
    return RunState.CANCELED if run in LIVE_RUN_STATES else None


def trial_canceled_by_failure(trial: str) -> TrialState | None:
    """An unfinished trial of an experiment that fails at once is canceled."""
    return TrialState.CANCELED if trial not in FINAL_TRIAL_STATES else None
