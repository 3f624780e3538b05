"""RunEnds: a run's end noticed from its exit file, the scheduler's final word, or its
disappearance."""

from __future__ import annotations

import time
from pathlib import Path

from hpcdet.daemon.controls import Controls
from hpcdet.daemon.ingestion import Ingestion
from hpcdet.daemon.run_ends import RunEnds
from hpcdet.rundir.atomic import write_atomic
from hpcdet.rundir.layout import EXIT_FILE
from tests.unit.daemon.services.support import World, one_run, squeue_line


def _run_ends(w: World) -> RunEnds:
    jobs = w.jobs()
    guard = w.guard(jobs)
    controls = Controls(w.store, w.paths, w.configs, jobs, w.site(), guard)
    feed = Ingestion(w.store, w.paths, w.configs, w.search, guard)
    return RunEnds(w.store, w.journal, w.paths, w.configs, jobs, feed, controls, w.retention())


def test_an_exit_file_ends_the_run_and_decides_the_trial(tmp_path: Path) -> None:
    w, run_dir = one_run(tmp_path)
    ends = _run_ends(w)
    [run] = w.store.live_runs()
    ends.check(run)
    assert w.store.runs()[0].state == "PENDING"  # nothing says it ended
    w.report(run_dir, ("metrics", {"group": "training", "steps_completed": 1,
                                   "metrics": {"loss": 1.0}}))
    write_atomic(run_dir / EXIT_FILE, {"exit_code": 0})
    ends.check(run)
    [run] = w.store.runs()
    assert (run.state, run.exit_code, run.event_seq) == ("COMPLETED", 0, 1)
    assert w.store.trial(1).state == "COMPLETED"


def test_a_failed_run_is_restarted_until_max_restarts(tmp_path: Path) -> None:
    w, run_dir = one_run(tmp_path)  # max_restarts 1
    ends = _run_ends(w)
    write_atomic(run_dir / EXIT_FILE, {"exit_code": 3})
    ends.check(w.store.live_runs()[0])
    trial = w.store.trial(1)
    assert (trial.state, trial.restarts, trial.end_reason) == ("QUEUED", 1, "exited with code 3")
    run_dir = w.run(1, 1, run_id=2, job_id="102")
    write_atomic(run_dir / EXIT_FILE, {"exit_code": 3})
    ends.check(w.store.live_runs([(1, 2)])[0])
    trial = w.store.trial(1)
    assert (trial.state, trial.end_reason) == (
        "ERROR", "exited with code 3; max_restarts (1) used up")


def test_a_job_gone_from_the_scheduler_without_an_exit_is_a_node_failure(
        tmp_path: Path) -> None:
    w, _ = one_run(tmp_path)
    ends = _run_ends(w)
    for _ in range(2):
        ends.jobs.poll()  # squeue lists nothing
    ends.check(w.store.live_runs()[0])
    [run] = w.store.runs()
    assert run.state == "NODE_FAIL"
    assert w.store.trial(1).state == "QUEUED"  # the daemon resubmits it


def test_a_run_killed_by_a_signal_waits_for_the_scheduler_to_say_why(tmp_path: Path) -> None:
    # PBS's walltime kill: the harness traps SIGTERM and exits 143 while qstat still says R;
    # decided at once, it was the user's failure (FAILED, a restart used) instead of TIMEOUT.
    w, run_dir = one_run(tmp_path, max_restarts=0)
    ends = _run_ends(w)
    write_atomic(run_dir / EXIT_FILE, {"exit_code": 143, "ended": time.time()})
    w.runner.squeue = [squeue_line("101", "RUNNING", "None")]
    ends.jobs.poll()
    ends.check(w.store.live_runs()[0])
    assert w.store.runs()[0].state == "RUNNING"  # not decided yet
    w.runner.squeue = [squeue_line("101", "TIMEOUT", "TimeLimit")]
    ends.jobs.poll()
    ends.check(w.store.live_runs()[0])
    [run] = w.store.runs()
    assert (run.state, run.exit_code) == ("TIMEOUT", 143)
    assert w.store.trial(1).state == "QUEUED"  # resubmitted from its checkpoint, no restart
    assert w.store.trial(1).restarts == 0


def test_a_signalled_run_is_decided_alone_when_the_scheduler_says_nothing_in_time() -> None:
    from hpcdet.daemon.run_ends import SCHEDULER_WORD_GRACE, awaits_scheduler

    killed = {"exit_code": 137, "ended": 1000.0}
    assert awaits_scheduler(killed, job_ended=False, now=1001.0)
    assert not awaits_scheduler(killed, job_ended=True, now=1001.0)
    assert not awaits_scheduler(killed, job_ended=False, now=1000.0 + SCHEDULER_WORD_GRACE)
    assert not awaits_scheduler({"exit_code": 3, "ended": 1000.0}, job_ended=False, now=1001.0)
    assert not awaits_scheduler({"exit_code": 143}, job_ended=False, now=1001.0)
