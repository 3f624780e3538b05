from __future__ import annotations

from hpcdet.states import (
    SILENT_EXIT,
    JobState,
    RunEnd,
    TrialState,
    decide_run_end,
    experiment_end_state,
)

OK = JobState.COMPLETED


def test_exit_zero_without_ack_completes() -> None:
    d = decide_run_end(RunEnd(0, OK, False, False), "ACTIVE", 0, 5)
    assert (d.trial_state, d.restarts) == ("COMPLETED", 0)


def test_exit_zero_after_ack_is_preempted() -> None:
    assert decide_run_end(RunEnd(0, OK, True, False), "PAUSED", 0, 5).trial_state == "PAUSED"
    assert decide_run_end(RunEnd(0, OK, True, False), "ACTIVE", 0, 5).trial_state == "QUEUED"


def test_failures_use_up_max_restarts() -> None:
    d = decide_run_end(RunEnd(3, OK, False, False), "ACTIVE", 0, 1)
    assert (d.trial_state, d.restarts) == ("QUEUED", 1)
    d = decide_run_end(RunEnd(3, OK, False, False), "ACTIVE", 1, 1)
    assert d.trial_state == "ERROR" and "max_restarts (1)" in d.reason
    assert decide_run_end(RunEnd(1, OK, False, False), "ACTIVE", 0, 0).trial_state == "ERROR"


def test_cluster_caused_ends_do_not_count() -> None:
    for state in (JobState.TIMEOUT, JobState.NODE_FAIL, JobState.PREEMPTED):
        d = decide_run_end(RunEnd(None, state, False, False), "ACTIVE", 0, 0)
        assert (d.trial_state, d.restarts) == ("QUEUED", 0)


def test_kill_cancels() -> None:
    d = decide_run_end(RunEnd(None, JobState.CANCELED, False, True), "STOPPING_CANCELED", 0, 5)
    assert d.trial_state == "CANCELED"


def test_cancel_of_a_pending_job_while_paused_pauses() -> None:
    d = decide_run_end(RunEnd(None, JobState.CANCELED, False, False), "PAUSED", 0, 0)
    assert d.trial_state == "PAUSED"


def test_experiment_end_state() -> None:
    assert experiment_end_state(["COMPLETED", "ACTIVE"]) is None
    assert experiment_end_state(["COMPLETED", "ERROR"]) == "COMPLETED"
    assert experiment_end_state(["ERROR", "ERROR"]) == "ERROR"
    assert experiment_end_state(["CANCELED"]) == "CANCELED"
    assert experiment_end_state([]) is None


def test_037_trial_out_of_operations_waits_for_promotion() -> None:
    end = RunEnd(0, OK, False, False, completed_ops=True)
    assert decide_run_end(end, "ACTIVE", 0, 0).trial_state == "WAITING"
    closed = RunEnd(0, OK, False, False, completed_ops=True, closed=True)
    assert decide_run_end(closed, "ACTIVE", 0, 0).trial_state == "COMPLETED"
    promoted = RunEnd(0, OK, False, False, completed_ops=True, pending_ops=True)
    assert decide_run_end(promoted, "ACTIVE", 0, 0).trial_state == "QUEUED"


def test_a_trial_that_ignores_its_operations_completes() -> None:
    ignored = RunEnd(0, OK, False, False, pending_ops=True)
    assert decide_run_end(ignored, "ACTIVE", 0, 0).trial_state == "COMPLETED"


def test_searcher_stop_completes_the_trial() -> None:
    acked = RunEnd(0, OK, True, False, stop_requested=True)
    assert decide_run_end(acked, "ACTIVE", 0, 5).trial_state == "COMPLETED"
    canceled = RunEnd(None, JobState.CANCELED, False, False, stop_requested=True)
    assert decide_run_end(canceled, "ACTIVE", 0, 5).trial_state == "COMPLETED"


def test_exit_zero_without_any_report_completes_with_a_word() -> None:
    d = decide_run_end(RunEnd(0, OK, False, False, reported=False), "ACTIVE", 0, 5)
    assert (d.trial_state, d.reason) == ("COMPLETED", SILENT_EXIT)
    assert "without reporting any metrics" in SILENT_EXIT
    assert decide_run_end(RunEnd(0, OK, False, False), "ACTIVE", 0, 5).reason == ""


def test_a_failed_startup_hook_is_named_in_the_reason() -> None:
    end = RunEnd(exit_code=7, job_state=JobState.FAILED, preempt_acked=False,
                 trial_killed=False, hook_failed=7)
    decision = decide_run_end(end, "ACTIVE", restarts=0, max_restarts=0)
    assert decision.trial_state == TrialState.ERROR
    assert decision.reason.startswith("startup-hook.sh failed with exit code 7")
    assert "max_restarts (0) used up" in decision.reason
