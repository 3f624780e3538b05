"""Trial and experiment states, and the pure rules that move between them.

Experiment states follow Determined: ACTIVE, PAUSED, STOPPING_CANCELED (kill or cancel asked,
jobs still ending), STOPPING_ERROR (the search failed), and the final COMPLETED, CANCELED,
ERROR. Trial states: QUEUED (in hpcdet's own queue, no job yet), ACTIVE (a job exists),
PAUSED, WAITING (0.37 ASHA: out of operations, not promoted yet, no job), and the final
COMPLETED, CANCELED, ERROR.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hpcdet.schedulers.base import JobState

FINAL_TRIAL_STATES = frozenset({"COMPLETED", "CANCELED", "ERROR"})
FINAL_EXPERIMENT_STATES = frozenset({"COMPLETED", "CANCELED", "ERROR"})
IDLE_TRIAL_STATES = frozenset({"QUEUED", "PAUSED", "WAITING"})  # not final, and no job
STOPPING_STATES = frozenset({"STOPPING_CANCELED", "STOPPING_ERROR"})

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


@dataclass(frozen=True)
class Decision:
    trial_state: str  # QUEUED means: submit again
    restarts: int
    reason: str


def decide_run_end(
    end: RunEnd, experiment_state: str, restarts: int, max_restarts: int
) -> Decision:
    """How a trial goes on after its job ended (Determined's exit rules, spec §1.5)."""
    stopping = experiment_state in ("STOPPING_CANCELED", "CANCELED", "STOPPING_ERROR")
    if end.trial_killed or stopping:
        return Decision("CANCELED", restarts, "canceled by the user")
    if end.stop_requested and (end.exit_code == 0 or end.job_state == JobState.CANCELED):
        return Decision("COMPLETED", restarts, "stopped early by the searcher")
    paused = experiment_state == "PAUSED"
    if end.exit_code == 0 and not end.preempt_acked:
        # 0.37: a trial that worked through operations and ran out waits for a promotion;
        # one that never completed an operation stopped by itself, and is done.
        if end.completed_ops and not end.closed:
            if end.pending_ops:
                return Decision("PAUSED" if paused else "QUEUED", restarts, "promoted")
            return Decision("WAITING", restarts, "waiting for the searcher to promote it")
        # Determined completes it too; a trial that said nothing at all is worth a word.
        return Decision("COMPLETED", restarts, "" if end.reported else SILENT_EXIT)
    if end.exit_code == 0 and end.preempt_acked:
        return Decision("PAUSED" if paused else "QUEUED", restarts, "preempted")
    if end.job_state in _CLUSTER_ENDS:
        return Decision("PAUSED" if paused else "QUEUED", restarts, _CLUSTER_ENDS[end.job_state])
    if end.job_state == JobState.CANCELED and paused:
        return Decision("PAUSED", restarts, "paused before it started")
    reason = f"exited with code {end.exit_code}" if end.exit_code is not None else (
        f"job ended as {end.job_state.value} without an exit status"
    )
    if restarts + 1 > max_restarts:
        return Decision("ERROR", restarts, f"{reason}; max_restarts ({max_restarts}) used up")
    return Decision("PAUSED" if paused else "QUEUED", restarts + 1, reason)


def experiment_end_state(trial_states: Sequence[str]) -> str | None:
    """The experiment's final state once every trial is final, else None (spec §4)."""
    if not trial_states or any(s not in FINAL_TRIAL_STATES for s in trial_states):
        return None
    n = len(trial_states)
    if sum(s == "ERROR" for s in trial_states) >= n:
        return "ERROR"
    if sum(s == "CANCELED" for s in trial_states) >= n:
        return "CANCELED"
    return "COMPLETED"


def experiment_final_state(
    experiment_state: str, searcher_done: bool, trial_states: Sequence[str]
) -> str | None:
    """The state an unfinished experiment ends in now, or None while it goes on.

    An experiment stopped before its search created a trial ends too (canceled or failed).
    """
    if experiment_state == "PAUSED" or any(s not in FINAL_TRIAL_STATES for s in trial_states):
        return None
    if experiment_state == "STOPPING_ERROR":
        return "ERROR"
    if experiment_state == "STOPPING_CANCELED":
        return experiment_end_state(trial_states) or "CANCELED"
    if not searcher_done:
        return None  # the searcher may still create trials
    return experiment_end_state(trial_states) or "COMPLETED"


def idle_trials_follow(experiment_state: str) -> tuple[frozenset[str], str] | None:
    """(from which states, to which) an experiment's new state moves its trials without a job.

    Part of the same decision as the experiment's state: journaled and applied with it, so a
    daemon killed in between cannot leave queued trials in a stopped experiment.
    """
    if experiment_state == "PAUSED":
        return frozenset({"QUEUED"}), "PAUSED"
    if experiment_state == "ACTIVE":
        return frozenset({"PAUSED"}), "QUEUED"
    if experiment_state in STOPPING_STATES:
        return IDLE_TRIAL_STATES, "CANCELED"
    return None
