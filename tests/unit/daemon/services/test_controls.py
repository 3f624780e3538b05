"""Controls: what each live run's control file says, stopping and escalation."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hpcdet.daemon.controls import Controls
from hpcdet.rundir.control import Control, read_control
from hpcdet.rundir.layout import CONTROL_FILE, NODES_DIR
from hpcdet.store.entries import ExperimentStateChanged
from tests.unit.daemon.services.support import World, one_run, squeue_line


def _controls(w: World) -> Controls:
    jobs = w.jobs()
    return Controls(w.store, w.paths, w.configs, jobs, w.site(), w.guard(jobs))


def _control(run_dir: Path) -> dict[str, object]:
    control: dict[str, object] = json.loads((run_dir / CONTROL_FILE).read_text())
    return control


def test_a_running_trial_is_told_to_carry_on_then_to_checkpoint_on_pause(
        tmp_path: Path) -> None:
    w, run_dir = one_run(tmp_path)
    controls = _controls(w)
    controls.sync_all()
    assert _control(run_dir) == {"preempt": False, "reason": "", "best_validation": None}
    assert read_control(run_dir / CONTROL_FILE) == Control()  # what the trial reads of it
    (run_dir / NODES_DIR).mkdir()  # it has started
    w.journal.record(1, ExperimentStateChanged(state="PAUSED", cascade=True))
    controls.sync_all()
    assert _control(run_dir)["preempt"] is True
    assert _control(run_dir)["reason"] == "the experiment was paused"
    assert (1, 1) in controls.preempt_asked
    assert w.runner.commands("scancel") == []


def test_a_run_that_has_not_started_is_canceled_when_stopped(tmp_path: Path) -> None:
    w, run_dir = one_run(tmp_path)
    controls = _controls(w)
    controls.stop(1, [w.store.trial(1)], graceful=True)
    assert w.runner.commands("scancel") == [["scancel", "101"]]
    w.journal.record(1, ExperimentStateChanged(state="STOPPING_CANCELED", cascade=True))
    controls.sync_all()
    assert _control(run_dir)["reason"] == "the experiment was canceled"


def test_a_started_run_stops_gracefully_through_its_control_file(tmp_path: Path) -> None:
    w, run_dir = one_run(tmp_path)
    (run_dir / NODES_DIR).mkdir()
    controls = _controls(w)
    controls.stop(1, [w.store.trial(1)], graceful=True)
    assert w.runner.commands("scancel") == []
    controls.stop(1, [w.store.trial(1)], graceful=False)
    assert w.runner.commands("scancel") == [["scancel", "101"]]


def test_a_trial_that_ignores_preemption_is_canceled_after_the_timeout(tmp_path: Path) -> None:
    w, run_dir = one_run(tmp_path, preemption_timeout=60)
    w.runner.squeue = [squeue_line("101", "RUNNING", "None")]
    controls = _controls(w)
    controls.jobs.poll()
    (run_dir / NODES_DIR).mkdir()
    w.journal.record(1, ExperimentStateChanged(state="PAUSED", cascade=True))
    controls.sync_all()
    controls.escalate()
    assert w.runner.commands("scancel") == []  # asked just now
    controls.preempt_asked[(1, 1)] = time.time() - 61
    controls.escalate()
    assert w.runner.commands("scancel") == [["scancel", "101"]]
    assert controls.preempt_asked == {}
