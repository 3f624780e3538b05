"""A damaged journal is one experiment's trouble: its bad lines are skipped and reported, the
rest of it applies, and neither a restart nor the next decision fails on it."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from hpcdet.daemon.journal import Journal
from hpcdet.rundir.atomic import read_lines
from hpcdet.store import journal_apply
from hpcdet.store.entries import (
    ExperimentCreated,
    ExperimentErrorSet,
    ExperimentFailed,
    ExperimentMetaChanged,
    TrialCreated,
)
from tests.unit.daemon.fake_local import (
    FakeLocal,
    asha_config,
    create,
    drive,
    journal_one_submitted_run,
    new_daemon,
)


def _damage(path: Path, *lines: str) -> None:
    """Insert ``lines`` after the journal's first entry (the experiment's creation)."""
    first, *rest = path.read_text().splitlines(keepends=True)
    path.write_text(first + "".join(line + "\n" for line in lines) + "".join(rest))


def test_a_restart_skips_and_reports_damaged_journal_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Not JSON, an unknown kind, a known kind without its fields: each is skipped with its
    offset, reported once, and the experiment (rebuilt from its journal) carries on."""
    cluster = FakeLocal()
    daemon = new_daemon(tmp_path, cluster)
    exp_id = create(daemon, asha_config(max_trials=2))
    daemon.tick()
    cluster.step()
    daemon.tick()
    path = daemon.paths.journal(exp_id)
    offset = len(path.read_text().splitlines(keepends=True)[0])
    _damage(path, '{"kind": "trial_state", "trial', '{"kind": "from_a_newer_hpcdet"}',
            json.dumps({"kind": "run_submitted", "exp_id": exp_id}))
    daemon.store.close()
    daemon.paths.database().unlink()  # rebuilt from the run tree, damaged journal included

    with caplog.at_level(logging.WARNING):
        daemon = new_daemon(tmp_path, cluster)
        daemon.reconcile()
        daemon.reconcile()  # a second reading reports nothing new
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 3
    assert f"a corrupt line in {path} at byte offset {offset}" in skipped[0]
    assert "unknown kind 'from_a_newer_hpcdet'" in skipped[1]
    assert "cannot be applied" in skipped[2]
    assert [t.state for t in daemon.store.trials(exp_id)] == ["ACTIVE", "ACTIVE"]
    drive(daemon, cluster)
    assert daemon.store.experiment(exp_id).state == "COMPLETED"


def test_a_journal_that_fails_to_replay_at_start_fails_only_its_experiment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = FakeLocal()
    daemon = new_daemon(tmp_path, cluster)
    bad = create(daemon, asha_config(max_trials=2))
    good = create(daemon, asha_config(max_trials=2))
    daemon.store.close()
    daemon.paths.database().unlink()

    replay = Journal.replay
    failed: list[int] = []

    def replay_failing_once(self: Journal, exp_id: int, written_at: int = -1) -> int:
        if exp_id == bad and not failed:
            failed.append(exp_id)
            raise RuntimeError("unreadable")
        return replay(self, exp_id, written_at)

    monkeypatch.setattr(Journal, "replay", replay_failing_once)
    daemon = new_daemon(tmp_path, cluster)
    daemon.reconcile()  # the daemon starts
    drive(daemon, cluster)
    assert daemon.store.experiment(good).state == "COMPLETED"
    exp = daemon.store.experiment(bad)
    assert (exp.state, exp.error) == (
        "ERROR", "replaying its journal failed: RuntimeError: unreadable")
    assert not cluster.live()


def test_a_decision_that_fails_to_apply_leaves_no_line_after_a_torn_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failed entry is cut where it starts, after the torn tail was cut: cutting at the
    size taken before left the entry whole when the tail was longer than it."""
    daemon = new_daemon(tmp_path, FakeLocal())
    exp_id = create(daemon, asha_config())
    path = daemon.paths.journal(exp_id)
    before = list(read_lines(path))
    with open(path, "a") as f:
        f.write('{"kind": "trial_state", "note": "' + "x" * 500)  # a daemon killed mid-write

    def failing(s: Any, e: Any, at: Any) -> None:
        raise RuntimeError("cannot apply")

    monkeypatch.setitem(journal_apply.APPLIERS, ExperimentErrorSet, failing)
    with pytest.raises(RuntimeError):
        daemon.journal.record(exp_id, ExperimentErrorSet(message="m"))
    assert list(read_lines(path)) == before
    assert path.read_bytes().endswith(b"\n")


def test_journals_with_an_experiment_failed_entry_still_apply(tmp_path: Path) -> None:
    """Written by hpcdet before a failure went through STOPPING_ERROR (and now when stopping a
    failed experiment fails too): the experiment ends at once, its runs marked canceled."""
    daemon = new_daemon(tmp_path, FakeLocal())
    journal = daemon.journal
    journal_one_submitted_run(journal)
    journal.record(1, ExperimentFailed(message="search failed"))
    exp = daemon.store.experiment(1)
    assert (exp.state, exp.error) == ("ERROR", "search failed")
    assert daemon.store.trial(1).state == "CANCELED"
    assert [r.state for r in daemon.store.runs([1])] == ["CANCELED"]


def _count_appends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many entries each journal append wrote, in order."""
    from hpcdet.daemon import journal

    sizes: list[int] = []
    append = journal.append_lines

    def counted(path: Path, lines: list[dict[str, Any]]) -> int:
        sizes.append(len(lines))
        return append(path, lines)

    monkeypatch.setattr(journal, "append_lines", counted)
    return sizes


def test_decisions_made_together_take_one_append_and_apply_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search's start: its input and the trials it creates (each with its operation and
    close) are one append, numbered by their place in it; a single entry stays as it was."""
    daemon = new_daemon(tmp_path, FakeLocal())
    sizes = _count_appends(monkeypatch)
    config = asha_config(max_trials=4, max_concurrent_trials=4)
    config["searcher"] = {"name": "random", "metric": "loss", "max_trials": 4,
                          "max_concurrent_trials": 4, "max_length": 1}
    exp_id = create(daemon, config)
    assert sizes[:2] == [1, 1 + 4 * 3]  # experiment_created; the search's input and decisions
    entries = list(read_lines(daemon.paths.journal(exp_id)))
    assert "part" not in entries[0]
    assert [e["part"] for e in entries[1:14]] == list(range(13))
    assert [e["kind"] for e in entries[1:5]] == [
        "searcher_event", "trial_created", "op_issued", "trial_closed"]
    assert [t.id for t in daemon.store.trials(exp_id)] == [1, 2, 3, 4]
    assert [t.ops for t in daemon.store.trials(exp_id)] == [(1,)] * 4
    assert daemon.store.experiment(exp_id).actions_done == 12


def test_an_append_a_crash_left_a_hole_in_applies_up_to_the_hole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A page of an append that never reached the disk reads as a damaged line: the entries
    of that append after it are skipped too, so the state is one the same entries recorded
    one by one could have left; the next append applies as usual."""
    daemon = new_daemon(tmp_path, FakeLocal())
    journal = daemon.journal
    journal.record(1, ExperimentCreated(name="e", config=asha_config(), backend="local",
                   searcher="asha"))
    journal.record_all(1, [TrialCreated(trial_id=i, hparams={}, trial_seed=0, request_id=i - 1)
                           for i in (1, 2, 3)])
    journal.record(1, TrialCreated(trial_id=4, hparams={}, trial_seed=0, request_id=3))
    path = daemon.paths.journal(1)
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = "\0" * (len(lines[2]) - 1) + "\n"  # trial 2's entry
    path.write_text("".join(lines))
    daemon.store.close()
    daemon.paths.database().unlink()

    with caplog.at_level(logging.WARNING):
        daemon = new_daemon(tmp_path, FakeLocal())
        daemon.journal.replay_all()
    assert [t.id for t in daemon.store.trials(1)] == [1, 4]
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 2
    assert "a corrupt line" in skipped[0]
    assert "an entry whose append lost an entry before it" in skipped[1]


def test_an_append_one_entry_of_which_fails_to_apply_leaves_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = new_daemon(tmp_path, FakeLocal())
    exp_id = create(daemon, asha_config())
    path = daemon.paths.journal(exp_id)
    before = path.read_bytes()
    applied = daemon.store.experiment(exp_id).journal_offset

    def failing(s: Any, e: Any, at: Any) -> None:
        raise RuntimeError("cannot apply")

    monkeypatch.setitem(journal_apply.APPLIERS, ExperimentErrorSet, failing)
    with pytest.raises(RuntimeError):
        daemon.journal.record_all(exp_id, [ExperimentMetaChanged(name="renamed"),
                                           ExperimentErrorSet(message="m")])
    assert path.read_bytes() == before
    exp = daemon.store.experiment(exp_id)
    assert (exp.name, exp.journal_offset) == ("asha", applied)
