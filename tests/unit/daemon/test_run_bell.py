"""The bell: a run that wrote what the daemon decides on, or ended, is looked at on the next
tick; the others wait for the next sweep of every live run (the daemon reading a real run
tree and database, and a real batch script ringing)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from hpcdet.daemon.loop import MAX_POLL_SECONDS, MAX_SWEEP_SECONDS, POLL_SHARE, Daemon
from hpcdet.paths import StatePaths
from hpcdet.rundir import layout
from hpcdet.rundir.event_writer import EventWriter
from hpcdet.schedulers.base import JobRequest
from hpcdet.schedulers.local import LocalScheduler
from tests.unit.daemon.two_runs import two_running_runs


def _two_runs(tmp_path: Path) -> tuple[Daemon, StatePaths]:
    paths = StatePaths(tmp_path)
    paths.prepare()
    daemon = two_running_runs(paths)
    daemon.reconcile()
    return daemon, paths


def _writer(paths: StatePaths, e: int) -> EventWriter:
    run_dir = paths.run(e, e, 1)
    return EventWriter(run_dir / layout.EVENTS_FILE, bell=layout.bell(run_dir))


def _steps(daemon: Daemon, trial_id: int, group: str = "training") -> list[int]:
    return [m.steps_completed for m in daemon.store.metrics(trial_id, group)]


def test_a_tick_reads_the_runs_that_rang_and_a_sweep_every_run(tmp_path: Path) -> None:
    daemon, paths = _two_runs(tmp_path)
    writers = {e: _writer(paths, e) for e in (1, 2)}
    for writer in writers.values():
        writer.emit("metrics", {"group": "training", "steps_completed": 1,
                                "metrics": {"loss": 1.0}})
        writer.flush()
    assert not daemon.run_bell.rung()  # training metrics wait for the sweep
    writers[1].emit("metrics", {"group": "validation", "steps_completed": 1,
                                "metrics": {"loss": 0.5}})
    writers[1].flush()
    assert daemon.run_bell.rung()

    daemon.tick(sweep=False)
    assert (_steps(daemon, 1), _steps(daemon, 1, "validation")) == ([1], [1])
    assert _steps(daemon, 2) == []
    assert not daemon.run_bell.rung()  # each ring is taken once

    # What is not a ring (a directory, say) neither wakes the loop nor stops a tick.
    (paths.bell / "notes").mkdir()
    assert not daemon.run_bell.rung()
    daemon.tick(sweep=False)
    assert _steps(daemon, 2) == []
    daemon.tick()
    assert _steps(daemon, 2) == [1]


def test_sweeps_come_less_often_the_longer_they_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon, _ = _two_runs(tmp_path)
    monkeypatch.setattr(daemon.ingestion, "ingest_all", lambda runs: time.sleep(0.02))
    daemon.tick()
    # 0.02 s or more of sweeping at 0.5% of the time: the next sweep in 4 s or more.
    assert daemon.next_sweep - time.time() > 3.0
    monkeypatch.setattr(daemon.ingestion, "ingest_all", lambda runs: time.sleep(0.2))
    daemon.tick()
    assert 9.0 < daemon.next_sweep - time.time() <= MAX_SWEEP_SECONDS


def test_polls_come_less_often_the_more_cpu_they_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon, _ = _two_runs(tmp_path)
    daemon.jobs.poll_interval = 5.0
    daemon.poll_cost = 0.001  # a cheap poll (reconcile's own poll costs more on a loaded machine)
    assert daemon.poll_spacing() == 5.0

    def busy() -> None:  # a poll that costs 20 ms of CPU
        began = time.process_time()
        while time.process_time() - began < 0.02:
            pass

    monkeypatch.setattr(daemon.queue, "order", busy)
    daemon._poll()
    assert daemon.poll_cost >= 0.02
    assert daemon.poll_spacing() >= 0.02 / POLL_SHARE > 5.0  # its CPU kept to POLL_SHARE
    daemon.poll_cost = 10.0
    assert daemon.poll_spacing() == MAX_POLL_SECONDS
    daemon.jobs.poll_interval = 120.0  # a longer interval the user or site set stays
    assert daemon.poll_spacing() == 120.0


def test_a_run_that_ends_rings_from_its_batch_script(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    paths.prepare()
    run_dir = paths.run(12, 345, 6)
    run_dir.mkdir(parents=True)
    python = tmp_path / "python"  # stands in for the harness: it ends at once
    python.write_text("#!/bin/sh\nexit 3\n")
    python.chmod(0o700)
    script = LocalScheduler({}).render_script(JobRequest("x", run_dir, str(python)))
    subprocess.run(["bash", "-c", script], check=False, timeout=30,
                   env={"HPCDET_LOCAL_JOB_ID": "7", "PATH": "/usr/bin:/bin"})
    assert json.loads((run_dir / layout.EXIT_FILE).read_text())["exit_code"] == 3
    assert layout.bell(run_dir) == paths.bell / "12.345.6"
    assert layout.bell(run_dir).exists()
    assert layout.parse_ring("12.345.6") == (12, 345, 6)
    assert layout.parse_ring(".x.tmp") is None


def test_between_sweeps_an_end_is_seen_when_its_run_rings(tmp_path: Path) -> None:
    daemon, paths = _two_runs(tmp_path)
    for e in (1, 2):
        (paths.run(e, e, 1) / layout.EXIT_FILE).write_text('{"exit_code": 0}')
    layout.bell(paths.run(2, 2, 1)).touch()  # as the batch script rings after its exit file

    daemon.jobs.last_poll = 0.0  # a tick with a poll, which says both jobs still run
    daemon.tick(sweep=False)
    assert daemon.jobs.polls == 2
    assert [r.trial_id for r in daemon.store.live_runs()] == [1]  # 1 did not ring: not yet
    daemon.tick()
    assert daemon.store.live_runs() == []


def test_a_ring_that_cannot_be_removed_rings_once_and_the_loop_goes_on(tmp_path: Path) -> None:
    """A trial that made a directory by its ring's name failed every tick (unlink: EISDIR)."""
    daemon, paths = _two_runs(tmp_path)
    ring = layout.bell(paths.run(1, 1, 1))
    ring.mkdir(parents=True)
    (ring / "inside").touch()  # not even rmdir would take it
    assert daemon.run_bell.rung()
    assert daemon.run_bell.take() == {(1, 1)}
    assert not daemon.run_bell.rung() and daemon.run_bell.take() == set()
    daemon.tick(sweep=False)
    assert ring.is_dir()
