"""Jobs: the one status query, what it stores in runs, vanished jobs, submit and cancel."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from hpcdet.daemon.jobs import CANCEL_BATCH, Jobs
from hpcdet.errors import SchedulerCommandError
from hpcdet.schedulers.base import SiteLimits
from hpcdet.schedulers.pbs import PbsScheduler
from hpcdet.schedulers.runner import CommandRunner, Result
from tests.unit.daemon.services.support import World, squeue_line


def _world(tmp_path: Path) -> World:
    w = World(tmp_path)
    w.experiment(1)
    w.trial(1, 1)
    w.trial(1, 2, request_id=1)
    w.run(1, 1, job_id="101")
    w.run(1, 2, job_id="102")
    return w


def test_a_poll_stores_pending_and_running_with_the_reason_in_words(tmp_path: Path) -> None:
    w = _world(tmp_path)
    w.runner.squeue = [squeue_line("101", "PENDING", "Priority"),
                       squeue_line("102", "RUNNING", "None")]
    jobs = w.jobs()
    assert jobs.poll()
    runs = {r.job_id: (r.state, r.reason) for r in w.store.runs()}
    assert runs["101"][0] == "PENDING" and "priority" in runs["101"][1].lower()
    assert runs["102"][0] == "RUNNING"
    assert w.runner.commands("squeue") == [w.scheduler.status_command([])]
    assert jobs.polls == 1


def test_a_state_the_backend_cannot_name_keeps_the_last_one(tmp_path: Path) -> None:
    w = _world(tmp_path)
    jobs = w.jobs()
    w.runner.squeue = [squeue_line("101", "RUNNING", "None"), squeue_line("102", "PENDING")]
    jobs.poll()
    w.runner.squeue = [squeue_line("101", "SOMETHING_NEW", "None"), squeue_line("102")]
    jobs.poll()
    assert {r.job_id: r.state for r in w.store.runs()} == {"101": "RUNNING", "102": "PENDING"}
    assert len(w.store.runs(live_only=True)) == 2


def test_a_job_missing_from_two_polls_in_a_row_has_vanished(tmp_path: Path) -> None:
    w = _world(tmp_path)
    jobs = w.jobs()
    w.runner.squeue = [squeue_line("102")]
    jobs.poll()
    assert not jobs.vanished("101")
    w.runner.squeue = [squeue_line("101"), squeue_line("102")]
    jobs.poll()  # listed again: the count starts over
    w.runner.squeue = [squeue_line("102")]
    jobs.poll()
    assert not jobs.vanished("101")
    jobs.poll()
    assert jobs.vanished("101") and not jobs.vanished("102")


def test_accounting_is_asked_about_jobs_gone_from_the_queue(tmp_path: Path) -> None:
    w = _world(tmp_path)
    w.scheduler.limits = SiteLimits(accounting=True)
    w.runner.squeue = [squeue_line("102")]
    w.runner.sacct = "101|COMPLETED|0:0\n"
    jobs = w.jobs()
    jobs.poll()
    assert w.runner.commands("sacct")[0][5] == "101"
    assert jobs.statuses["101"].state.is_final and jobs.statuses["101"].exit_code == 0


def test_a_failed_query_backs_off_and_changes_nothing(tmp_path: Path) -> None:
    w = _world(tmp_path)
    w.runner.refuse.add("squeue")
    jobs = w.jobs()
    assert not jobs.poll()
    assert jobs.last_poll > time.time() + 4  # the next poll waits longer
    assert jobs.polls == 0
    assert {r.state for r in w.store.runs()} == {"PENDING"}


def test_cancel_asks_once_and_again_after_a_refusal(tmp_path: Path) -> None:
    w = _world(tmp_path)
    jobs = w.jobs()
    jobs.cancel(["101", "102"])
    jobs.cancel(["102"])
    assert w.runner.commands("scancel") == [["scancel", "101", "102"]]
    w.runner.refuse.add("scancel")
    jobs.cancel(["103"])
    w.runner.refuse.clear()
    jobs.cancel(["103"])
    assert w.runner.commands("scancel")[-2:] == [["scancel", "103"], ["scancel", "103"]]


def test_cancel_of_many_is_a_command_per_batch_and_skips_tasks_of_a_canceled_array(
        tmp_path: Path) -> None:
    w = _world(tmp_path)
    jobs = w.jobs()
    jobs.cancel(["7"])
    jobs.cancel(["7_1", "7_2", "8_1"])
    assert w.runner.commands("scancel") == [["scancel", "7"], ["scancel", "8_1"]]
    many = [str(1000 + k) for k in range(CANCEL_BATCH + 1)]
    jobs.cancel(many)
    assert [len(cmd) - 1 for cmd in w.runner.commands("scancel")[2:]] == [CANCEL_BATCH, 1]


def test_a_cancel_marks_the_runs_of_its_jobs_and_arrays_killed(tmp_path: Path) -> None:
    """The SIGTERM a cancel brings must end the trial, not ask it to checkpoint."""
    w = _world(tmp_path)
    w.trial(1, 3, request_id=2)
    w.trial(1, 4, request_id=3)
    task = w.run(1, 3, job_id="7_0")
    untouched = w.run(1, 4, job_id="8_0")
    jobs = w.jobs()
    jobs.run_dir = w.paths.run
    jobs.cancel(["101", "7"])
    killed = {p.parent.name + "/" + p.parent.parent.name
              for p in w.paths.experiment(1).rglob("kill")}
    assert killed == {"run-1/1", "run-1/3"}
    assert (task / "kill").exists() and not (untouched / "kill").exists()
    # A packed run's id goes to no scheduler: its pilot, which reads the same file, ends it.
    w.trial(1, 5, request_id=4)
    packed = w.run(1, 5, job_id="55+1.5.1")
    jobs.cancel(["55+1.5.1"])
    assert (packed / "kill").exists()
    assert w.runner.commands("scancel") == [["scancel", "101", "7"]]


def test_submit_and_find_by_name_and_directory(tmp_path: Path) -> None:
    w = _world(tmp_path)
    jobs = w.jobs()
    assert jobs.submit(tmp_path / "job.sh") == "101"
    assert w.runner.commands("sbatch") == [["sbatch", "--parsable", str(tmp_path / "job.sh")]]
    w.runner.squeue = [squeue_line("7", name="hpcdet-e1-t1-r2", workdir="/elsewhere"),
                       squeue_line("8", name="hpcdet-e1-t1-r2", workdir="/mine")]
    jobs.poll()
    assert jobs.find("hpcdet-e1-t1-r2", Path("/mine")) == "8"
    assert jobs.find("hpcdet-e1-t1-r3", Path("/mine")) == ""


class _Qstat(CommandRunner):
    """Answers qstat with one real 23.06.06 output (tests/unit/schedulers/pbs_samples)."""

    def __init__(self, sample: str) -> None:
        super().__init__()
        self.stdout = (Path(__file__).parents[2] / "schedulers" / "pbs_samples" / sample
                       ).read_text()
        self.ran: list[list[str]] = []

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        self.ran.append(list(cmd))
        return Result(self.stdout, "", 0)


def test_qstat_s_text_table_in_place_of_json_is_no_answer_not_every_job_gone(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    w = World(tmp_path)
    w.experiment(1)
    w.trial(1, 1)
    w.run(1, 1, job_id="3[0].pbshead")
    scheduler = PbsScheduler()
    scheduler.user = "pbsuser"
    # What 23.06.06 prints for `qstat -f -F json -t -u pbsuser` (exit 0).
    runner = _Qstat("qstat-f-json-t-u.json")
    jobs = Jobs(scheduler, runner, w.store, poll_interval=5.0)
    assert not jobs.poll()
    assert "text table" in caplog.text and jobs.missing.get("3[0].pbshead", 0) == 0
    assert runner.ran == [["qstat", "-f", "-F", "json", "-t"]]  # one call, and no -u
    runner.stdout = (Path(__file__).parents[2] / "schedulers" / "pbs_samples"
                     / "qstat-f-json-t.json").read_text()
    assert jobs.poll() and len(runner.ran) == 2  # listed: no second, history call
    assert [r.state for r in w.store.runs()] == ["RUNNING"]


class _Qdel(CommandRunner):
    """qdel as 23.06.06 answers it for a job that has finished (pbs_samples' transcript)."""

    def __init__(self) -> None:
        super().__init__()
        self.ran: list[list[str]] = []

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        self.ran.append(list(cmd))
        said = "".join(f"qdel: Job has finished {j}\n" for j in cmd[1:] if j.startswith("6"))
        if said:
            raise SchedulerCommandError(cmd, 35, "", said)
        return Result("", "", 0)


def test_qdel_of_a_finished_pbs_job_is_no_failure_and_not_asked_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    transcript = (Path(__file__).parents[2] / "schedulers" / "pbs_samples"
                  / "ops-qdel-qalter-qorder-qmove-qhold.log").read_text()
    assert "$ qdel 6.pbshead\nqdel: Job has finished 6.pbshead\n[rc=35]" in transcript
    w = World(tmp_path)
    runner = _Qdel()
    jobs = Jobs(PbsScheduler(), runner, w.store, poll_interval=5.0)
    jobs.cancel(["6.pbshead", "7.pbshead"])
    jobs.cancel(["6.pbshead", "7.pbshead"])
    assert runner.ran == [["qdel", "6.pbshead", "7.pbshead"]]
    assert "cancel of" not in caplog.text


class _RootsQsub(CommandRunner):
    """qsub as 23.06.06 answers root when the server's acl_roots lacks it (reference README)."""

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        raise SchedulerCommandError(cmd, 175, "", "qsub: Bad UID for job execution\n")


def test_a_refused_submission_says_what_to_do_when_the_backend_knows(tmp_path: Path) -> None:
    w = World(tmp_path)
    jobs = Jobs(PbsScheduler(), _RootsQsub(), w.store, poll_interval=5.0)
    with pytest.raises(SchedulerCommandError) as refused:
        jobs.submit(tmp_path / "job.pbs")
    said = str(refused.value)
    assert said.startswith("`qsub` failed with exit code 175: qsub: Bad UID for job execution")
    assert "acl_roots" in said and "run hpcdet as your own user" in said
    assert not refused.value.transient


def test_a_pbs_job_is_found_by_the_directory_it_was_submitted_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # PBS records qsub's own working directory as PBS_O_WORKDIR; submitted from the daemon's,
    # a job lost between qsub and the journal could never be adopted by its run directory.
    import os

    double = Path(__file__).parents[3] / "doubles" / "pbs"
    home = tmp_path / "pbs-server"
    home.mkdir()
    (home / "config.json").write_text('{"acl_roots": ["root"]}')
    monkeypatch.setenv("PBS_DOUBLE_HOME", str(home))
    monkeypatch.setenv("PATH", f"{double / 'bin'}{os.pathsep}{os.environ['PATH']}")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    script = run_dir / "job.pbs"
    script.write_text("#!/bin/bash\n#PBS -N hpcdet-e1-t1-r1\nsleep 30\n")
    w = World(tmp_path)
    jobs = Jobs(PbsScheduler(), CommandRunner(), w.store, poll_interval=5.0)
    job_id = jobs.submit(script)
    w.experiment(1)
    w.trial(1, 1)
    w.run(1, 1, job_id=job_id)
    try:
        assert jobs.poll()
        assert jobs.statuses[job_id].workdir == str(run_dir)
        assert jobs.find("hpcdet-e1-t1-r1", run_dir) == job_id
    finally:
        CommandRunner().run(["qdel", job_id], check=False)
