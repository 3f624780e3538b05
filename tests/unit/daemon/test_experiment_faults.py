"""One experiment's failure is that experiment's: its step fails, it ends in ERROR with the
reason, and the loop, the other experiments and a restart go on. Also: what a daemon started
slowly (or killed) must not lose between its steps."""

from __future__ import annotations

import errno
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hpcdet.daemon import run_ends
from hpcdet.daemon.searching import SearchDriver
from hpcdet.errors import SchedulerCommandError
from hpcdet.protocol.process import STATUS_FILE
from hpcdet.rundir.atomic import read_json
from hpcdet.rundir.layout import EVENTS_FILE
from hpcdet.schedulers.runner import Result
from hpcdet.search import Initialize, OpCompleted, Searcher
from hpcdet.search.base import Action, Event
from hpcdet.store.entries import RunEnded, TrialStateChanged
from hpcdet.store.repository import Store
from hpcdet.views.experiments import faults_in
from tests.unit.daemon.fake_local import (
    FakeLocal,
    Killed,
    asha_config,
    create,
    drive,
    journal_one_submitted_run,
    kill_after,
    new_daemon,
    stored_metrics,
)

BAD = "bad_loss"  # the searcher metric of the experiment whose searcher fails


def _searcher_fails_on(monkeypatch: pytest.MonkeyPatch, kind: type[Event]) -> None:
    """The searcher of experiments with metric BAD raises on events of ``kind`` (as adaptive
    ASHA with max_length 0 did on every tick, whatever the validation does about it now)."""
    feed = Searcher.feed

    def failing_feed(self: Searcher, event: Event) -> list[Action]:
        if self.config.metric == BAD and isinstance(event, kind):
            raise ZeroDivisionError("division by zero")
        return feed(self, event)

    monkeypatch.setattr(Searcher, "feed", failing_feed)


def _bad_and_good(root: Path, cluster: FakeLocal) -> Any:
    daemon = new_daemon(root, cluster)
    daemon.reconcile()
    bad = asha_config(max_trials=2)
    bad["searcher"]["metric"] = BAD
    create(daemon, bad)
    create(daemon, asha_config(max_trials=2))
    return daemon


def _assert_bad_failed_good_completed(daemon: Any, cluster: FakeLocal) -> None:
    bad, good = daemon.store.experiments()
    assert (bad.state, good.state) == ("ERROR", "COMPLETED")
    assert "ZeroDivisionError: division by zero" in bad.error
    assert {t.state for t in daemon.store.trials(bad.id)} == {"CANCELED"}
    assert {r.state for t in daemon.store.trials(bad.id) for r in daemon.store.runs([t.id])} <= {
        "CANCELED"}
    assert not cluster.live()  # the failed experiment's jobs were canceled
    good_metrics = {k: v for k, v in cluster.reported.items()
                    if daemon.store.trial(k[0]).experiment_id == good.id}
    assert {k: v for k, v in stored_metrics(daemon).items() if k in good_metrics} == good_metrics


def test_a_searcher_that_fails_in_the_loop_fails_only_its_experiment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _searcher_fails_on(monkeypatch, OpCompleted)
    cluster = FakeLocal()
    daemon = _bad_and_good(tmp_path, cluster)
    drive(daemon, cluster)
    _assert_bad_failed_good_completed(daemon, cluster)


def test_a_daemon_restarted_with_a_failing_experiment_starts_and_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = FakeLocal()
    daemon = _bad_and_good(tmp_path, cluster)
    daemon.tick()
    cluster.step()
    daemon.store.close()
    # The searcher cannot even be rebuilt now (as with a config that no longer loads).
    _searcher_fails_on(monkeypatch, Initialize)
    daemon = new_daemon(tmp_path, cluster)
    daemon.reconcile()
    assert daemon.handle("ping", {})["pid"]
    drive(daemon, cluster)
    _assert_bad_failed_good_completed(daemon, cluster)


def test_a_search_that_fails_to_start_leaves_an_errored_experiment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Log hyperparameters with large bounds raised OverflowError at create and left an
    ACTIVE experiment without trials."""
    _searcher_fails_on(monkeypatch, Initialize)
    daemon = new_daemon(tmp_path, FakeLocal())
    bad = asha_config()
    bad["searcher"]["metric"] = BAD
    staging = tmp_path / "staging"
    staging.mkdir()
    reply = daemon.creation.create(bad, str(staging))
    assert "division by zero" in reply["warning"]
    assert daemon.store.experiment(reply["experiment_id"]).state == "ERROR"


def test_an_experiment_killed_before_its_search_created_a_trial_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SearchDriver, "feed", lambda *args: None)  # no trial yet
    daemon = new_daemon(tmp_path, FakeLocal())
    exp_id = create(daemon, asha_config())
    monkeypatch.undo()
    daemon.commands.kill(exp_id)
    daemon.tick()
    assert daemon.store.experiment(exp_id).state == "CANCELED"


@pytest.mark.parametrize("verb", ["kill", "pause"])
def test_a_daemon_killed_right_after_a_stop_or_pause_leaves_no_queued_trial(
    verb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed right after journaling the experiment's new state: its queued trials follow it
    (they were separate entries, and a killed experiment stayed STOPPING_CANCELED for ever)."""
    cluster = FakeLocal()
    daemon = new_daemon(tmp_path, cluster, submissions_per_minute=1)
    exp_id = create(daemon, asha_config(max_concurrent_trials=2))
    assert [t.state for t in daemon.store.trials()] == ["ACTIVE", "QUEUED"]
    kill_after(monkeypatch, lambda written: True)
    with pytest.raises(Killed):
        daemon.handle(verb, {"exp_id": exp_id})
    daemon.store.close()
    monkeypatch.undo()
    daemon = new_daemon(tmp_path, cluster, submissions_per_minute=1)
    daemon.reconcile()
    drive(daemon, cluster, ticks=10)
    expected = {"kill": ("CANCELED", {"CANCELED"}), "pause": ("PAUSED", {"PAUSED"})}[verb]
    exp = daemon.store.experiment(exp_id)
    assert (exp.state, {t.state for t in daemon.store.trials()}) == expected
    assert not cluster.live()


def test_events_that_arrive_while_the_daemon_starts_reach_the_searcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trial reports its operation completed between the new daemon's first read of its
    log and the next one; it waits for the decision, so it must get it."""
    cluster = FakeLocal()
    daemon = new_daemon(tmp_path, cluster)
    exp_id = create(daemon, asha_config(max_trials=1))
    cluster.step()  # the job starts
    [job] = cluster.live()
    cluster.report(job, [  # a validation and a checkpoint: nothing the searcher decides on
        ("metrics", {"group": "validation", "steps_completed": 2, "metrics": {"loss": 1.0},
                     "batch_metrics": None}),
        ("checkpoint", {"uuid": "ck", "steps_completed": 2}),
    ])
    daemon.store.close()  # the daemon is stopped, and started again

    ingest = Store.ingest_events
    arrived = []

    def ingest_while_the_trial_reports(self: Store, *args: Any) -> Any:
        events = ingest(self, *args)
        if not arrived:
            arrived.append(True)
            cluster.report(job, [("searcher_completed", {"length": 2, "metric": 1.0})])
        return events

    monkeypatch.setattr(Store, "ingest_events", ingest_while_the_trial_reports)
    daemon = new_daemon(tmp_path, cluster)
    daemon.reconcile()
    daemon.tick()
    [run] = daemon.store.runs()
    assert (run.event_seq, run.searcher_seq, run.ops_decided) == (3, 3, 1)
    assert daemon.store.experiment(exp_id).state == "ACTIVE"


def test_journals_with_the_trial_state_in_a_separate_entry_still_apply(tmp_path: Path) -> None:
    daemon = new_daemon(tmp_path, FakeLocal())
    journal = daemon.journal
    journal_one_submitted_run(journal)
    journal.record(1, RunEnded(trial_id=1, run_id=1, exit_code=1, job_state="FAILED",
                   outcome="exited with code 1"))
    assert daemon.store.trial(1).state == "ACTIVE"
    journal.record(1, TrialStateChanged(trial_id=1, state="ERROR", restarts=0, reason="exited"))
    assert (daemon.store.trial(1).state, daemon.store.trial(1).end_reason) == ("ERROR", "exited")


def test_a_stored_config_that_validation_now_refuses_fails_only_its_experiment(
    tmp_path: Path,
) -> None:
    """An experiment journaled by an older hpcdet whose rules were looser (here adaptive ASHA
    with max_length 0, refused at create since): a restarted daemon ends it in ERROR with
    the config's own message, and serves the others."""
    cluster = FakeLocal()
    daemon = new_daemon(tmp_path, cluster)
    daemon.reconcile()
    old = create(daemon, asha_config(max_trials=2))
    good = create(daemon, asha_config(max_trials=2))
    journal = daemon.paths.journal(old)
    lines = journal.read_text().splitlines(keepends=True)
    entry = json.loads(lines[0])
    entry["config"]["searcher"]["max_length"] = 0
    journal.write_text(json.dumps(entry) + "\n" + "".join(lines[1:]))
    daemon.store.close()
    daemon.paths.database().unlink()  # the next daemon rebuilds from the run tree

    daemon = new_daemon(tmp_path, cluster)
    daemon.reconcile()
    drive(daemon, cluster)
    assert daemon.store.experiment(good).state == "COMPLETED"
    failed = daemon.store.experiment(old)
    assert failed.state == "ERROR"
    assert "max_length" in failed.error
    assert not cluster.live()


@dataclass
class CancelFailsOnce(FakeLocal):
    """The first cancel command fails (scancel timing out against a busy controller)."""

    cancel_failed: bool = False

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        if "cancel" in cmd and not self.cancel_failed:
            self.cancel_failed = True
            raise SchedulerCommandError(cmd, 1, "", "Socket timed out on send/recv operation")
        return super().run(cmd, check, stdin)


def test_a_failed_experiment_whose_cancel_fails_still_has_its_jobs_canceled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its runs stay live until the scheduler has ended them: the cancel is asked again on the
    next tick (the runs used to be marked canceled at once, and the jobs ran to walltime)."""
    cluster = CancelFailsOnce()
    daemon = _bad_and_good(tmp_path, cluster)  # jobs submitted, not started
    daemon.store.close()
    _searcher_fails_on(monkeypatch, Initialize)
    daemon = new_daemon(tmp_path, cluster)
    daemon.reconcile()
    assert cluster.cancel_failed
    drive(daemon, cluster)
    bad, good = daemon.store.experiments()
    assert (bad.state, good.state) == ("ERROR", "COMPLETED")
    assert "division by zero" in bad.error
    bad_jobs = [j for j in cluster.jobs.values() if f"exp-{bad.id}" in j.run_dir.parts]
    assert bad_jobs
    assert {j.state for j in bad_jobs} == {"CANCELLED"}
    assert not cluster.live()


def _exit_reads_fail(monkeypatch: pytest.MonkeyPatch, exp_id: int, times: int) -> None:
    """Reading whether a run of experiment ``exp_id`` has exited fails with EIO (an NFS
    glitch): the first ``times`` times."""
    read_exit = run_ends.read_exit
    failures: list[str] = []

    def failing_read(path: str) -> Any:
        if f"/exp-{exp_id}/" in path and len(failures) < times:
            failures.append(path)
            raise OSError(errno.EIO, "Input/output error", path)
        return read_exit(path)

    monkeypatch.setattr(run_ends, "read_exit", failing_read)


def test_a_passing_io_error_is_retried_and_the_experiment_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = FakeLocal()
    daemon = new_daemon(tmp_path, cluster)
    exp_id = create(daemon, asha_config(max_trials=2))
    _exit_reads_fail(monkeypatch, exp_id, times=1)
    daemon.tick()  # the step is skipped for this round, not raised to the loop's back-off
    assert [f.step for f in daemon.guard.current_faults()] == ["ending a run"]
    drive(daemon, cluster)
    exp = daemon.store.experiment(exp_id)
    assert (exp.state, exp.error) == ("COMPLETED", "")
    assert daemon.guard.current_faults() == []


def test_an_io_error_that_lasts_fails_its_experiment_and_the_others_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = FakeLocal()
    daemon = new_daemon(tmp_path, cluster)
    daemon.guard.io_retry_seconds = 0.0
    bad = create(daemon, asha_config(max_trials=2))
    good = create(daemon, asha_config(max_trials=2))
    _exit_reads_fail(monkeypatch, bad, times=10**6)
    faulty_ticks = 0
    for _ in range(60):
        daemon.tick()  # never raises: the fault is the bad experiment's
        if daemon.guard.current_faults() and daemon.store.experiment(bad).state == "ACTIVE":
            faulty_ticks += 1
        if not daemon.store.experiments(unfinished=True):
            break
        cluster.step()
    # Retried (for each of its runs) as many rounds as the policy says before it failed.
    assert faulty_ticks == daemon.guard.io_retry_rounds - 1
    assert daemon.store.experiment(good).state == "COMPLETED"
    failed = daemon.store.experiment(bad)
    assert failed.state == "ERROR"
    assert "ending a run failed: OSError: [Errno 5] Input/output error" in failed.error
    assert not cluster.live()


def test_a_passing_io_error_while_the_daemon_starts_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = new_daemon(tmp_path, FakeLocal())
    starts: list[int] = []

    def reconcile() -> None:
        starts.append(1)
        if len(starts) == 1:
            raise OSError(errno.ESTALE, "Stale file handle")

    def tick(sweep: bool = True) -> None:
        daemon.stopping = True

    monkeypatch.setattr(daemon, "reconcile", reconcile)
    monkeypatch.setattr(daemon, "tick", tick)
    daemon.serve()
    assert len(starts) == 2


def test_an_unreadable_run_is_its_experiments_fault_and_the_loop_serves_the_others(
    tmp_path: Path,
) -> None:
    """Issue 37: one run's unreadable event log failed every tick, so a new experiment's run
    sat PENDING and `daemon status` showed an old last tick. Now that run's experiment skips
    the step each round (a fault, in the status file) until the retry policy ends it."""
    cluster = FakeLocal()
    daemon = new_daemon(tmp_path, cluster)
    bad = create(daemon, asha_config(max_trials=1))
    for _ in range(2):  # its run starts and reports
        daemon.tick()
        cluster.step()
    [bad_job] = cluster.live()
    events = bad_job.run_dir / EVENTS_FILE
    assert events.exists()
    # ELOOP for every reader, root included (the tests run as root: modes do not stop it).
    events.unlink()
    events.symlink_to(EVENTS_FILE)

    good = create(daemon, asha_config(max_trials=2))
    for _ in range(40):
        before = time.time()
        daemon.tick()  # raised ELOOP to the loop's back-off before, every time
        assert daemon.last_tick >= before
        status = read_json(daemon.local_dir / STATUS_FILE)
        assert status["last_tick"] == daemon.last_tick
        if (daemon.store.experiment(good).state == "COMPLETED"
                and daemon.guard.rounds > 2 * daemon.guard.io_retry_rounds):
            break
        bad_job.state = "STALLED"  # runs on, writing nothing (it could not): not stepped
        cluster.step()
        bad_job.state = "RUNNING"
    assert daemon.store.experiment(good).state == "COMPLETED"
    [fault] = faults_in(status)
    assert (fault.experiment_id, fault.step, fault.trial_id, fault.run_id) == (
        bad, "reading an event log", 1, 1)
    assert fault.path == str(events) and "Too many levels of symbolic links" in fault.error
    # More rounds than the policy's, but not its 120 s: still retried.
    assert fault.rounds > daemon.guard.io_retry_rounds
    assert daemon.store.experiment(bad).state == "ACTIVE"

    # Once it has lasted as long as the policy allows, the experiment ends in ERROR.
    for lasting in daemon.guard.faults.values():
        lasting.since -= daemon.guard.io_retry_seconds
    drive(daemon, cluster)
    failed = daemon.store.experiment(bad)
    assert failed.state == "ERROR"
    assert failed.error.startswith(
        "reading an event log failed: OSError: [Errno 40] Too many levels of symbolic links")
    assert not cluster.live()
    assert faults_in(read_json(daemon.local_dir / STATUS_FILE)) == []
