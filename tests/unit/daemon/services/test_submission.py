"""Submission: queued trials become jobs or array tasks within the site's limits, refusals
end the trial with the reason, and what a killed daemon half-submitted is settled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon import journal
from hpcdet.daemon.controls import Controls
from hpcdet.daemon.submission import HOLD_FIRST_SECONDS, NEVER_RUNS_GRACE, Submission
from hpcdet.rundir.layout import CONTROL_FILE, SCRIPT_FILE, array_dir, array_slot
from hpcdet.schedulers.base import JobStatus
from hpcdet.states import JobState
from tests.unit.daemon.fake_local import Killed, kill_after
from tests.unit.daemon.services.support import World, squeue_line

RANDOM = {"name": "random", "metric": "loss", "max_length": 1, "max_trials": 3}
HPARAMS = {"lr": {"type": "double", "minval": 0.1, "maxval": 1.0}}


def _submission(w: World) -> Submission:
    jobs = w.jobs()
    guard = w.guard(jobs)
    site = w.site()
    site.read()
    controls = Controls(w.store, w.paths, w.configs, jobs, site, guard)
    return Submission(w.store, w.journal, w.paths, w.cluster, w.configs, jobs, site, w.search,
                      controls, guard)


def _started(w: World, exp_id: int = 1, **config: object) -> None:
    w.experiment(exp_id, **config)
    exp = w.store.experiment(exp_id)
    w.search.start(exp, w.configs.get(exp))


def test_a_queued_trial_becomes_a_job(tmp_path: Path) -> None:
    w = World(tmp_path)
    _started(w)
    _submission(w).submit_queued()
    [run] = w.store.runs()
    assert (run.state, run.job_id) == ("PENDING", "101")
    run_dir = w.paths.run(1, run.trial_id, 1)
    assert w.runner.commands("sbatch") == [["sbatch", "--parsable", str(run_dir / SCRIPT_FILE)]]
    assert "#SBATCH" in (run_dir / SCRIPT_FILE).read_text()
    assert (run_dir / CONTROL_FILE).exists()  # the trial reads it at start
    assert w.store.trials(1)[0].state == "ACTIVE"


def test_submissions_stay_within_the_rate_the_cluster_config_allows(tmp_path: Path) -> None:
    w = World(tmp_path, ClusterConfig(backend="slurm", submissions_per_minute=1))
    _started(w, 1)
    _started(w, 2)
    submission = _submission(w)
    submission.submit_queued()
    submission.submit_queued()
    assert len(w.runner.commands("sbatch")) == 1
    assert [t.state for t in w.store.trials()] == ["ACTIVE", "QUEUED"]


def test_a_refused_submission_ends_the_trial_with_the_reason(tmp_path: Path) -> None:
    w = World(tmp_path)
    _started(w)
    w.runner.refuse.add("sbatch")
    _submission(w).submit_queued()
    [trial] = w.store.trials(1)
    assert trial.state == "ERROR"
    assert trial.end_reason.startswith("submission refused: ")
    assert "sbatch: error: refused" in trial.end_reason


NODE_CONFIGURATION = ("sbatch: error: Batch job submission failed: Requested node "
                      "configuration is not available")


def test_a_job_refused_for_nodes_the_cluster_no_longer_has_goes_again_laid_out_anew(
        tmp_path: Path) -> None:
    """Issue 42: the daemon read 8-CPU nodes; they became 4-CPU nodes; sbatch refused the
    6-slot trial laid out as 1 node x 6. The site is read again and the trial goes as 2 x 3."""
    w = World(tmp_path)
    w.runner.sinfo = "debug*|2|8|(null)\n"
    _started(w, resources={"slots_per_trial": 6})
    submission = _submission(w)
    w.runner.sinfo = "debug*|2|4|(null)\n"
    w.runner.refuse.add("sbatch")
    w.runner.refusal = NODE_CONFIGURATION
    submission.submit_queued()
    assert w.store.trial(1).state == "QUEUED"  # queued again at once, not left to settle()
    assert "laid out again" in w.store.runs()[0].outcome
    w.runner.refuse.clear()
    submission.submit_queued()
    last = w.store.runs()[-1]
    assert (last.state, w.store.trial(1).state) == ("PENDING", "ACTIVE")
    script = (w.paths.run(1, 1, last.run_id) / SCRIPT_FILE).read_text()
    assert "--nodes=2" in script, script
    # Refused so while the site is as read: the trial ends with what sbatch said.
    w.runner.refuse.add("sbatch")
    _started(w, 2, resources={"slots_per_trial": 6})
    submission.submit_queued()
    assert w.store.trials(2)[0].state == "ERROR"
    assert "Requested node configuration" in w.store.trials(2)[0].end_reason


# What sbatch printed when this test cluster's job table was full (MaxJobCount).
TABLE_FULL = ("error: Slurm temporarily unable to accept job, sleeping and retrying\n"
              "sbatch: error: Batch job submission failed: Resource temporarily unavailable")


def test_a_submission_refused_for_now_waits_and_is_tried_again(tmp_path: Path) -> None:
    w = World(tmp_path)
    _started(w)
    w.runner.refuse.add("sbatch")
    w.runner.refusal = TABLE_FULL
    submission = _submission(w)
    submission.submit_queued()
    [run] = w.store.runs()
    assert (run.state, w.store.trial(1).state) == ("SUBMITTING", "ACTIVE")  # not ended
    assert submission.hold_seconds == HOLD_FIRST_SECONDS
    assert "Resource temporarily unavailable" in submission.held_reason
    submission.submit_queued()
    assert len(w.runner.commands("sbatch")) == 1  # held: not one attempt a tick
    # The next poll settles it: the scheduler does not have it, so the trial is queued again.
    submission.jobs.poll()
    submission.settle()
    assert (w.store.runs()[0].outcome, w.store.trial(1).state) == ("never submitted", "QUEUED")
    submission.held_until = 0.0  # the hold over, refused again: it doubles
    submission.submit_queued()
    assert submission.hold_seconds == 2 * HOLD_FIRST_SECONDS
    submission.jobs.poll()
    submission.settle()
    w.runner.refuse.clear()
    submission.held_until = 0.0
    submission.submit_queued()
    assert [(r.run_id, r.state, r.job_id) for r in w.store.runs()][-1] == (3, "PENDING", "101")
    assert (submission.hold_seconds, submission.held_reason) == (0.0, "")


@pytest.mark.parametrize("taken", [True, False])
def test_an_array_refused_for_now_is_adopted_if_the_scheduler_took_it_else_sent_again(
    tmp_path: Path, taken: bool
) -> None:
    w = World(tmp_path)
    _started(w, searcher=RANDOM, hyperparameters=HPARAMS)
    w.runner.refuse.add("sbatch")
    w.runner.refusal = "error: Batch job submission failed: Socket timed out on send/recv"
    submission = _submission(w)
    submission.submit_queued()
    [array] = w.store.arrays(1, submitted=False)
    assert array.job_id == "" and w.store.experiment(1).state == "ACTIVE"
    assert w.store.runs() == []
    if taken:  # it reached slurmctld all the same: the next poll shows it
        w.runner.squeue = [squeue_line("777_[0-2]", name="hpcdet-e1-array0",
                                       workdir=str(array_dir(w.paths.experiment(1))))]
    submission.jobs.poll()
    submission.settle()
    assert [a.job_id for a in w.store.arrays(1)] == (["777"] if taken else [])
    w.runner.refuse.clear()
    submission.held_until = 0.0
    submission.submit_queued()
    # Once in all: adopted, or sent again once the hold is over.
    assert len(w.runner.commands("sbatch")) == (1 if taken else 2)
    job = "777" if taken else "101"
    assert sorted(r.job_id for r in w.store.runs()) == [f"{job}_{i}" for i in range(3)]


def test_a_refusal_for_good_still_ends_the_experiment(tmp_path: Path) -> None:
    w = World(tmp_path)
    _started(w, searcher=RANDOM, hyperparameters=HPARAMS)
    w.runner.refuse.add("sbatch")
    w.runner.refusal = "error: Batch job submission failed: Invalid partition name specified"
    _submission(w).submit_queued()
    assert "Invalid partition name" in w.store.experiment(1).error


def test_a_search_goes_as_one_job_array_within_max_array_size(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.runner.config = "MaxArraySize = 2\n"
    _started(w, searcher=RANDOM, hyperparameters=HPARAMS)
    submission = _submission(w)
    submission.submit_queued()
    [array] = w.store.arrays(1)
    assert (array.job_id, array.offset, array.count) == ("101", 0, 2)
    assert len(w.runner.commands("sbatch")) == 1
    submitted = sorted(r.job_id for r in w.store.runs())
    assert submitted == ["101_0", "101_1"]  # the third waits for the next array


def test_a_run_half_submitted_by_a_killed_daemon_is_adopted_or_requeued(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.experiment(1)
    w.trial(1, 1)
    w.trial(1, 2, request_id=1)
    w.run(1, 1)  # journaled as submitting, no job id
    w.run(1, 2)
    submission = _submission(w)
    w.runner.squeue = [squeue_line("555", name="hpcdet-e1-t1-r1",
                                   workdir=str(w.paths.run(1, 1, 1)))]
    submission.jobs.poll()
    submission.settle()
    adopted, requeued = w.store.runs()
    assert (adopted.state, adopted.job_id) == ("PENDING", "555")
    assert (requeued.state, requeued.outcome) == ("CANCELED", "never submitted")
    assert w.store.trial(2).state == "QUEUED"


def test_the_trials_of_an_array_go_into_their_tasks_with_two_journal_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their runs journaled as submitting in one append, then (slot files written) as
    submitted in another, whatever the number of trials."""
    w = World(tmp_path)
    _started(w, searcher=RANDOM, hyperparameters=HPARAMS)
    appended = _appends(monkeypatch)
    _submission(w).submit_queued()
    assert appended == [["array_submitting"], ["array_submitted"], ["run_submitting"] * 3,
                        ["run_submitted"] * 3]
    assert sorted(r.job_id for r in w.store.runs()) == ["101_0", "101_1", "101_2"]
    for trial in w.store.trials(1):
        run_dir = w.paths.run(1, trial.id, 1)
        slot = array_slot(w.paths.experiment(1), trial.request_id)
        assert slot.read_text() == str(run_dir)
        assert (run_dir / CONTROL_FILE).exists()


@pytest.mark.parametrize("killed_after", range(1, 7))
def test_a_daemon_killed_amid_handing_trials_to_their_tasks_hands_each_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, killed_after: int
) -> None:
    """Killed after any entry of the two appends (a crash can leave a prefix of one): the next
    daemon hands every trial's first run to its own task, and submits nothing again."""
    w = World(tmp_path)
    _started(w, searcher=RANDOM, hyperparameters=HPARAMS)
    submission = _submission(w)
    runs = ("run_submitting", "run_submitted")
    kill_after(monkeypatch, lambda kinds: kinds[-1] in runs
               and sum(k in runs for k in kinds) == killed_after)
    with pytest.raises(Killed):
        submission.submit_queued()
    monkeypatch.undo()
    w.store.close()

    again = World(tmp_path)
    again.runner.next_job = w.runner.next_job
    again.journal.replay_all()
    restarted = _submission(again)
    again.runner.squeue = [squeue_line("101_[0-2%3]", workdir=str(array_dir(
        again.paths.experiment(1))), name="hpcdet-e1-array0")]
    restarted.jobs.poll()
    restarted.settle()
    restarted.submit_queued()
    assert again.runner.commands("sbatch") == []
    runs = again.store.runs()
    assert sorted((r.trial_id, r.run_id, r.job_id) for r in runs) == [
        (1, 1, "101_0"), (2, 1, "101_1"), (3, 1, "101_2")]
    for trial in again.store.trials(1):
        slot = array_slot(again.paths.experiment(1), trial.request_id)
        assert slot.read_text() == str(again.paths.run(1, trial.id, 1))


def _appends(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The kinds of the entries of each journal append, in order."""
    appended: list[list[str]] = []
    append = journal.append_lines

    def counted(path: Path, lines: list[dict[str, Any]]) -> int:
        appended.append([e["kind"] for e in lines])
        return append(path, lines)

    monkeypatch.setattr(journal, "append_lines", counted)
    return appended


def test_a_job_the_scheduler_says_can_never_run_stops_its_experiment_and_is_canceled(
        tmp_path: Path) -> None:
    w = World(tmp_path)
    for exp_id in (1, 2):
        w.experiment(exp_id)
        w.trial(exp_id, exp_id)
        w.run(exp_id, exp_id, job_id=f"10{exp_id}")
    submission = _submission(w)
    reason = "can never start: Not enough total nodes available"
    submission.jobs.statuses = {
        "101": JobStatus(JobState.PENDING, reason, "Q", never_runs=True),
        "102": JobStatus(JobState.PENDING, "waiting", "Q")}
    submission.refuse_never_running(now=1000.0)
    # A node may come back meanwhile: nothing is refused before the grace has passed.
    submission.refuse_never_running(now=1000.0 + NEVER_RUNS_GRACE - 1)
    assert w.store.experiment(1).error == ""
    submission.refuse_never_running(now=1000.0 + NEVER_RUNS_GRACE)
    submission.refuse_never_running(now=1000.0 + NEVER_RUNS_GRACE + 5)  # said once
    first, second = w.store.experiment(1), w.store.experiment(2)
    assert first.error == ("the scheduler can never start job 101 as asked (" + reason + "): "
                           "ask for fewer slots or nodes, or another resource pool")
    assert second.error == ""
    assert sum(1 for line in w.paths.journal(1).read_text().splitlines()
               if "experiment_error" in line) == 1
    w.finisher(submission.jobs).finish(first)
    assert w.runner.commands("scancel") == [["scancel", "101"]]
    assert w.store.experiment(1).state == "STOPPING_ERROR"


def test_a_job_that_could_run_again_starts_the_grace_afresh(tmp_path: Path) -> None:
    w = World(tmp_path)
    w.experiment(1)
    w.trial(1, 1)
    w.run(1, 1, job_id="101")
    submission = _submission(w)
    never = JobStatus(JobState.PENDING, "can never start", "Q", never_runs=True)
    submission.jobs.statuses = {"101": never}
    submission.refuse_never_running(now=0.0)
    submission.jobs.statuses = {"101": JobStatus(JobState.PENDING, "waiting", "Q")}
    submission.refuse_never_running(now=NEVER_RUNS_GRACE - 10)  # a MOM came back
    submission.jobs.statuses = {"101": never}
    submission.refuse_never_running(now=NEVER_RUNS_GRACE + 10)
    assert w.store.experiment(1).error == ""
