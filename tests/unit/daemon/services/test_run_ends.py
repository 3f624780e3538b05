"""RunEnds: a run's end noticed from its exit file, the scheduler's final word, or its
disappearance."""

from __future__ import annotations

import os
import time
from pathlib import Path

from hpcdet.daemon.controls import Controls
from hpcdet.daemon.ingestion import Ingestion
from hpcdet.daemon.run_ends import RunEnds
from hpcdet.rundir.atomic import write_atomic
from hpcdet.rundir.layout import EXIT_FILE, NODES_DIR, node_info
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


def test_a_run_keeps_when_it_started_and_the_schedulers_account(tmp_path: Path) -> None:
    w, run_dir = one_run(tmp_path)
    w.scheduler.limits = w.scheduler.parse_limits(
        "AccountingStorageType = accounting_storage/slurmdbd\n")
    ends = _run_ends(w)
    (run_dir / NODES_DIR).mkdir()
    for rank, started in ((0, 1000.0), (1, 1003.0)):
        info = node_info(run_dir, rank)
        info.write_text("{}")
        os.utime(info, (started, started))
    w.runner.sacct = "101|COMPLETED|0:0|125|billing=4,cpu=4,gres/gpu=2,mem=8G,node=1\n"
    write_atomic(run_dir / EXIT_FILE, {"exit_code": 0})
    ends.check(w.store.live_runs()[0])
    [run] = w.store.runs()
    assert (run.started, run.used_seconds, run.used_gpus, run.used_cpus, run.usage_by) == (
        1000.0, 125, 2, 4, "sacct")
    assert w.runner.commands("sacct")[-1][-1] == "JobID,State,ExitCode,ElapsedRaw,AllocTRES"


def test_without_accounting_a_run_keeps_only_when_it_started(tmp_path: Path) -> None:
    w, run_dir = one_run(tmp_path)
    ends = _run_ends(w)
    write_atomic(run_dir / EXIT_FILE, {"exit_code": 0})
    ends.check(w.store.live_runs()[0])  # no nodes/: it never started
    [run] = w.store.runs()
    assert (run.started, run.used_seconds, run.usage_by) == (None, None, "")
    assert w.runner.commands("sacct") == []


def _short_runs(w: World, ends: RunEnds, trial_ids: range) -> None:
    """Trials whose one run started 40 s before it ended."""
    for trial_id in trial_ids:
        w.trial(1, trial_id)
        run_dir = w.run(1, trial_id, job_id=str(100 + trial_id))
        (run_dir / NODES_DIR).mkdir()
        info = node_info(run_dir, 0)
        info.write_text("{}")
        os.utime(info, (time.time() - 40, time.time() - 40))
        write_atomic(run_dir / EXIT_FILE, {"exit_code": 0})
        ends.check(w.store.live_runs([(trial_id, 1)])[0])


SEARCH = {"name": "random", "metric": "loss", "max_trials": 9, "max_length": 1}


def test_a_search_of_short_jobs_is_advised_once_its_first_three_runs_ended(
        tmp_path: Path) -> None:
    w = World(tmp_path)
    w.experiment(1, searcher=SEARCH)
    ends = _run_ends(w)
    _short_runs(w, ends, range(1, 3))
    assert w.store.experiment(1).advice == ""  # two runs say too little
    _short_runs(w, ends, range(3, 5))
    advice = w.store.experiment(1).advice
    assert "run 40 s each" in advice and "median of 3" in advice, advice
    assert "resources.packing" in advice
    journal = w.paths.journal(1).read_text()
    assert journal.count('"experiment_advice"') == 1


def test_a_packed_search_is_not_advised(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.experiment(1, searcher=SEARCH, resources={
        "slots_per_trial": 1, "packing": {"slots": 2, "walltime": "1:00:00", "allocations": 1}})
    ends = _run_ends(w)
    _short_runs(w, ends, range(1, 5))
    assert w.store.experiment(1).advice == ""


def test_the_tasks_of_an_array_ending_in_one_sweep_cost_one_accounting_query(
        tmp_path: Path) -> None:
    w = World(tmp_path)
    w.experiment(1, searcher=SEARCH)
    w.scheduler.limits = w.scheduler.parse_limits(
        "AccountingStorageType = accounting_storage/slurmdbd\n")
    ends = _run_ends(w)
    w.runner.sacct = "".join(f"100_{t}|COMPLETED|0:0|{60 + t}|cpu=1,node=1\n" for t in (1, 2, 3))
    for t in (1, 2, 3):
        w.trial(1, t)
        write_atomic(w.run(1, t, job_id=f"100_{t}") / EXIT_FILE, {"exit_code": 0})
    for t in (1, 2, 3):
        ends.check(w.store.live_runs([(t, 1)])[0])
    assert [r.used_seconds for r in w.store.runs()] == [61, 62, 63]
    assert len(w.runner.commands("sacct")) == 1
    assert "100" in w.runner.commands("sacct")[0]  # the array, not one task
