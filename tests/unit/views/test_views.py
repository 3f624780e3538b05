"""The views the CLI formats: experiments, a trial's metrics, checkpoints ranked, logs, and
which experiment a job id names."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from hpcdet.errors import NotFoundError, StateError, UsageError
from hpcdet.paths import StatePaths
from hpcdet.private import PrivacyError
from hpcdet.schedulers.slurm import SlurmScheduler
from hpcdet.views.checkpoints import copy_checkpoint, ranked_checkpoints, stored_checkpoint
from hpcdet.views.experiments import describe_experiment, experiment_rows, faults_in
from hpcdet.views.logs import new_log_lines
from hpcdet.views.queue import experiment_of
from hpcdet.views.trials import trial_metrics
from tests.support import ensure_user, require_root
from tests.unit.store.store_support import LOSS_SEARCHER, Journaled, write_events


@pytest.fixture
def j(tmp_path: Path) -> Journaled:
    """Experiment 1 with trials 1 (best loss 0.2, checkpoints c1..c3) and 2 (loss 0.7)."""
    j = Journaled(tmp_path)
    j.experiment(1, checkpoint_storage={"type": "shared_fs",
                                        "host_path": str(tmp_path / "ckpts")})
    for trial_id, losses in ((1, (0.9, 0.2, 0.5)), (2, (0.7,))):
        j.trial(1, trial_id, request_id=trial_id - 1)
        j.run(1, trial_id, job_id=f"10{trial_id}")
        events = tmp_path / f"events-{trial_id}.jsonl"
        for steps, loss in enumerate(losses, start=1):
            write_events(events, ("metrics", {"group": "validation", "steps_completed": steps,
                                              "metrics": {"loss": loss}}))
            if trial_id == 1:
                write_events(events, ("checkpoint", {"uuid": f"c{steps}",
                                                     "steps_completed": steps,
                                                     "resources": {"a": 2, "b": 3}}))
        write_events(events, ("metrics", {"group": "training", "steps_completed": 9,
                                          "metrics": {"acc": 1.0}}))
        j.store.ingest_events(trial_id, 1, events, LOSS_SEARCHER)
    return j


def test_experiment_rows_and_progress(j: Journaled) -> None:
    j.record(1, "trial_state", trial_id=2, state="COMPLETED")
    [row] = experiment_rows(j.store)
    assert row.experiment.id == 1
    assert row.progress == 0.5  # one of two trials done, the other has not said


def test_describe_names_the_best_trial_by_the_searcher_metric(j: Journaled) -> None:
    view = describe_experiment(j.store, 1)
    assert view.best is not None and (view.best.trial_id, view.best.value) == (1, 0.2)
    assert [t.trial.id for t in view.trials] == [1, 2]
    assert [r.job_id for r in view.runs] == ["101", "102"]
    assert view.searcher["metric"] == "loss"
    j.record(1, "op_issued", request_id=0, length=10, op_index=0)
    j.record(1, "trial_closed", request_id=0)
    assert describe_experiment(j.store, 1).trials[0].searcher == "ops 10 (0 done); closed"


def test_trial_metrics_keep_report_order_and_every_key(j: Journaled) -> None:
    reported = trial_metrics(j.store, 1)
    assert reported.keys == ["loss", "acc"]
    assert [(m.group, m.steps_completed) for m in reported.rows] == [
        ("validation", 1), ("validation", 2), ("validation", 3), ("training", 9)]
    assert [m.metrics for m in trial_metrics(j.store, 1, "training").rows] == [{"acc": 1.0}]
    with pytest.raises(NotFoundError, match="trial 9 not found"):
        trial_metrics(j.store, 9)


def test_checkpoints_ranked_and_the_best_k(j: Journaled, tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    listed = ranked_checkpoints(j.store, paths, 1)
    assert listed.storage == tmp_path / "ckpts"
    assert {c.checkpoint.uuid: c.metric for c in listed.checkpoints} == {
        "c1": 0.9, "c2": 0.2, "c3": 0.5}
    assert (listed.checkpoints[0].files, listed.checkpoints[0].size) == (2, 5)
    best = ranked_checkpoints(j.store, paths, 1, top=2).checkpoints
    assert [c.checkpoint.uuid for c in best] == ["c2", "c3"]


def test_a_stored_checkpoint_to_download(j: Journaled, tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    with pytest.raises(NotFoundError, match="missing from its storage"):
        stored_checkpoint(j.store, paths, "c2")
    (tmp_path / "ckpts" / "c2").mkdir(parents=True)
    stored = stored_checkpoint(j.store, paths, "c2")
    assert (stored.source, stored.validation) == (tmp_path / "ckpts" / "c2", {"loss": 0.2})
    j.record(1, "checkpoint_deleted", uuid="c2", trial_id=1)
    with pytest.raises(StateError, match="c2 is DELETED"):
        stored_checkpoint(j.store, paths, "c2")


def test_experiment_of_a_job_id(j: Journaled) -> None:
    j.record(1, "array_submitted", job_id="300", offset=0, count=2, throttle=0)
    slurm = SlurmScheduler()
    found = [experiment_of(j.store, job, slurm) for job in ("1", "101", "102", "300", "300_1")]
    assert found == [1, 1, 1, 1, 1]
    with pytest.raises(NotFoundError, match="no job '999'"):
        experiment_of(j.store, "999", slurm)


def test_new_log_lines_are_whole_lines_read_once(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    logs = paths.run(1, 1, 1) / "logs"
    logs.mkdir(parents=True)
    (logs / "node-0.log").write_text("t1 hello\nt2 half")
    offsets: dict[Path, int] = {}
    [[line]] = new_log_lines(paths, 1, 1, offsets)
    assert (line.node, line.text) == ("run-1/node-0", "t1 hello")
    assert new_log_lines(paths, 1, 1, offsets) == []
    with open(logs / "node-0.log", "a") as f:
        f.write(" line\n")
    assert [[x.text for x in chunk] for chunk in new_log_lines(paths, 1, 1, offsets)] == [
        ["t2 half line"]]


def test_faults_in_a_daemons_status_by_experiment() -> None:
    status = {"faults": [
        {"experiment_id": 1, "step": "reading an event log", "trial_id": 3, "run_id": 1,
         "path": "/s/events.jsonl", "error": "PermissionError: [Errno 13] Permission denied",
         "since": 5.0, "rounds": 7},
        {"experiment_id": 2, "step": "submission", "trial_id": None, "run_id": None,
         "path": "", "error": "OSError: [Errno 5] Input/output error", "since": 6.0,
         "rounds": 1},
        {"step": "from another version"},
    ]}
    assert [f.what for f in faults_in(status)] == ["reading an event log of run 3.1",
                                                    "submission"]
    [fault] = faults_in(status, 2)
    assert fault.to_dict() == status["faults"][1]
    assert faults_in({}) == [] and faults_in(status, 9) == []


# ------------------------------------------- downloads: paths another user owns or can write
# (issue 37). Real accounts: the tests run as root, and the other user owns what it planted.

OTHER = "hpcdet-pb"


@pytest.fixture
def stored(j: Journaled, tmp_path: Path) -> Path:
    """Checkpoint c2's files in its storage, and a file of the user's an attacker aims at."""
    require_root("needs root to make another user's files")
    ensure_user(OTHER)
    source = tmp_path / "ckpts" / "c2"
    source.mkdir(parents=True)
    (source / "a").write_text("weights")
    (tmp_path / "victim.txt").write_text("the user's own")
    return source


def test_a_download_copies_into_a_new_private_directory(
        j: Journaled, stored: Path, tmp_path: Path) -> None:
    dest = copy_checkpoint(j.store, StatePaths(tmp_path / "state"), "c2", tmp_path / "x" / "dl")
    assert (dest / "a").read_text() == "weights"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o700


def test_a_download_into_a_directory_of_another_user_is_refused(
        j: Journaled, stored: Path, tmp_path: Path) -> None:
    dest = tmp_path / "theirs"
    dest.mkdir(mode=0o777)
    (dest / "a").symlink_to(tmp_path / "victim.txt")
    os.lchown(dest / "a", _uid(OTHER), -1)
    shutil.chown(dest, OTHER)
    paths = StatePaths(tmp_path / "state")
    with pytest.raises(PrivacyError, match=f"{dest} is a directory owned by user {OTHER}"):
        copy_checkpoint(j.store, paths, "c2", dest)
    with pytest.raises(PrivacyError, match=f"{dest} is a directory owned by user {OTHER}"):
        copy_checkpoint(j.store, paths, "c2", dest / "new")  # nor into a new one in it
    assert (tmp_path / "victim.txt").read_text() == "the user's own"


def test_a_planted_symlink_in_a_download_destination_is_never_followed(
        j: Journaled, stored: Path, tmp_path: Path) -> None:
    dest = tmp_path / "mine"
    dest.mkdir(mode=0o777)
    dest.chmod(0o777)  # the user's, but open: another user plants a symlink in it
    (dest / "a").symlink_to(tmp_path / "victim.txt")
    os.lchown(dest / "a", _uid(OTHER), -1)
    paths = StatePaths(tmp_path / "state")
    with pytest.raises(PrivacyError, match=r"mode 0777.*chmod go-w"):
        copy_checkpoint(j.store, paths, "c2", dest)
    dest.chmod(0o755)
    with pytest.raises(UsageError, match="already holds files"):
        copy_checkpoint(j.store, paths, "c2", dest)
    assert (tmp_path / "victim.txt").read_text() == "the user's own"
    assert (dest / "a").is_symlink()


def test_a_download_from_storage_others_can_swap_is_refused(
        j: Journaled, stored: Path, tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    (tmp_path / "ckpts").chmod(0o777)
    with pytest.raises(PrivacyError, match=r"checkpoint_storage.host_path: .*ckpts can be "
                                           r"written by other users \(mode 0777\)"):
        copy_checkpoint(j.store, paths, "c2", tmp_path / "dl")
    (tmp_path / "ckpts").chmod(0o755)
    shutil.chown(stored, OTHER)  # swapped for another user's checkpoint
    with pytest.raises(PrivacyError, match=f"{stored} is a directory owned by user {OTHER}"):
        copy_checkpoint(j.store, paths, "c2", tmp_path / "dl")
    assert not (tmp_path / "dl").exists()


def _uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid
