"""The Core API tutorial stages in examples/core_api, unchanged, against a fake run directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hpcdet.rundir.atomic import write_atomic
from tests.unit.core.core_fakes import SHIM_DIR, TUTORIAL_DIR, FakeRun, make_run


def _ok(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stderr


def test_stage0_runs_without_the_core_api(fake_run: FakeRun) -> None:
    proc = fake_run.run_script("0_start.py")
    _ok(proc)
    assert "x is now 100" in proc.stdout
    assert not (fake_run.run_dir / "events.jsonl").exists()


def test_stage1_reports_training_and_validation_metrics(fake_run: FakeRun) -> None:
    proc = fake_run.run_script("1_metrics.py")
    _ok(proc)
    events = fake_run.events()
    assert [e.seq for e in events] == [1] * 10 + [2]  # one flush: the training reports' chunk
    assert [e.body for e in events] == [
        {"group": "training", "steps_completed": s, "metrics": {"x": s}, "batch_metrics": None,
         "time": e.body["time"]}
        for s, e in zip(range(10, 101, 10), events)
    ] + [
        {"group": "validation", "steps_completed": 100, "metrics": {"x": 100},
         "batch_metrics": None, "time": events[-1].body["time"]}
    ]
    # det.LOG_FORMAT, and the INFO log of every report.
    assert "INFO: [" in proc.stderr
    assert "hpcdet.core: report_training_metrics(steps_completed=10, metrics={'x': 10})" in (
        proc.stderr
    )


def test_stage2_checkpoints_every_ten_batches(fake_run: FakeRun) -> None:
    _ok(fake_run.run_script("2_checkpoints.py"))
    ckpts = fake_run.bodies("checkpoint")
    assert [c["steps_completed"] for c in ckpts] == list(range(10, 101, 10))
    last = ckpts[-1]
    assert last["metadata"] == {"steps_completed": 100}
    path = fake_run.checkpoint_dir / last["uuid"]
    assert (path / "state").read_text() == "100,100,7"
    assert last["resources"] == {
        "metadata.json": (path / "metadata.json").stat().st_size, "state": 9
    }
    assert [m["group"] for m in fake_run.bodies("metrics")][-1] == "validation"
    assert fake_run.bodies("preempt_ack") == []


def test_stage2_preempted_by_the_scheduler_then_resumed(fake_run: FakeRun) -> None:
    (fake_run.run_dir / "preempt").touch()
    _ok(fake_run.run_script("2_checkpoints.py"))
    assert [e.type for e in fake_run.events()] == ["metrics", "checkpoint", "preempt_ack"]
    uuid = fake_run.bodies("checkpoint")[0]["uuid"]

    resumed = fake_run.next_run(latest_checkpoint=uuid)
    _ok(resumed.run_script("2_checkpoints.py"))
    training = [m for m in resumed.bodies("metrics") if m["group"] == "training"]
    assert [m["steps_completed"] for m in training] == list(range(20, 101, 10))
    assert training[-1]["metrics"] == {"x": 100}


def test_stage2_preempted_by_the_daemon(fake_run: FakeRun) -> None:
    write_atomic(
        fake_run.run_dir / "control.json",
        {"preempt": True, "reason": "paused", "best_validation": None},
    )
    proc = fake_run.run_script("2_checkpoints.py")
    _ok(proc)
    assert [e.type for e in fake_run.events()] == ["metrics", "checkpoint", "preempt_ack"]
    assert "preemption requested: paused" in proc.stderr


def test_stage2_continue_trial_keeps_the_weight_but_not_the_batch(tmp_path: Path) -> None:
    first = make_run(tmp_path / "a")
    _ok(first.run_script("2_checkpoints.py"))
    uuid = first.bodies("checkpoint")[-1]["uuid"]
    # "Continue Trial": a new trial warm-started from trial 7's last checkpoint.
    other = make_run(
        tmp_path / "b", trial_id=8, checkpoint_dir=first.checkpoint_dir, latest_checkpoint=uuid
    )
    _ok(other.run_script("2_checkpoints.py"))
    training = [m for m in other.bodies("metrics") if m["group"] == "training"]
    assert [m["steps_completed"] for m in training] == list(range(10, 101, 10))
    assert training[0]["metrics"] == {"x": 110}


def test_stage3_searcher_operation_from_max_length(tmp_path: Path) -> None:
    config = {"searcher": {"name": "adaptive_asha", "metric": "x", "max_trials": 10,
                           "max_length": 100}}
    run = make_run(tmp_path, config=config, hparams={"increment_by": 3})
    _ok(run.run_script("3_hpsearch.py"))
    assert [p["length"] for p in run.bodies("searcher_progress")] == [
        float(b) for b in range(10, 101, 10)
    ]
    completed = run.bodies("searcher_completed")
    assert [(c["length"], c["metric"]) for c in completed] == [(100, 300.0)]
    assert len(run.bodies("checkpoint")) == 10
    types = [e.type for e in run.events()]
    assert types.index("searcher_completed") == len(types) - 1


def test_stage3_with_a_length_in_batches_takes_a_final_checkpoint(tmp_path: Path) -> None:
    config = {"searcher": {"name": "single", "metric": "x", "max_length": {"batches": 25}}}
    run = make_run(tmp_path, config=config, hparams={"increment_by": 1})
    _ok(run.run_script("3_hpsearch.py"))
    assert [c["steps_completed"] for c in run.bodies("checkpoint")] == [10, 20, 25]
    assert run.bodies("searcher_completed")[0]["length"] == 25


def test_stage3_without_max_length_explains_what_is_missing(fake_run: FakeRun) -> None:
    proc = fake_run.run_script("3_hpsearch.py")
    assert proc.returncode != 0
    assert "ValueError: searcher.operations() needs `searcher.max_length`" in proc.stderr


def test_stage1_off_cluster_with_plain_python(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HPCDET_CLUSTER_INFO"}
    env["PYTHONPATH"] = str(SHIM_DIR)
    env["XDG_DATA_HOME"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, str(TUTORIAL_DIR / "1_metrics.py")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    _ok(proc)
    assert "report_validation_metrics(steps_completed=100, metrics={'x': 100})" in proc.stderr
    assert not list(tmp_path.rglob("events.jsonl"))


def test_stage2_refuses_to_run_off_cluster(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HPCDET_CLUSTER_INFO"}
    env["PYTHONPATH"] = str(SHIM_DIR)
    proc = subprocess.run(
        [sys.executable, str(TUTORIAL_DIR / "2_checkpoints.py")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1
    assert "AssertionError: this example only runs on-cluster" in proc.stderr
