"""core_context.train on a fake run: validation rules, messages, and the events they produce."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hpcdet import core
from hpcdet.rundir.atomic import write_atomic
from tests.unit.core.core_fakes import FakeRun, make_run


def _metric_events(run: FakeRun) -> list[tuple[str, int, dict[str, object]]]:
    return [(b["group"], b["steps_completed"], b["metrics"]) for b in run.bodies("metrics")]


def test_reports_become_events_in_order(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        ctx.train.report_training_metrics(10, {"loss": 0.5}, batch_metrics=[{"loss": 0.6}])
        ctx.train.report_validation_metrics(10, {"acc": 0.9})
        ctx.train.report_metrics("inference", 10, {"latency": 3})
        ctx.train.report_progress(0.5)
        ctx.train.set_status("validating")
    events = on_cluster.events()
    assert [e.type for e in events] == ["metrics"] * 3 + ["progress", "status"]
    assert {k: v for k, v in events[0].body.items() if k != "time"} == {
        "group": "training", "steps_completed": 10, "metrics": {"loss": 0.5},
        "batch_metrics": [{"loss": 0.6}],
    }
    assert _metric_events(on_cluster)[1:] == [
        ("validation", 10, {"acc": 0.9}), ("inference", 10, {"latency": 3})
    ]
    assert events[3].body["progress"] == 0.5
    assert events[4].body["status"] == "validating"


def test_training_report_is_logged_at_info(
    on_cluster: FakeRun, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hpcdet.core")
    with core.init() as ctx:
        ctx.train.report_training_metrics(steps_completed=5, metrics={"x": 1})
    assert "report_training_metrics(steps_completed=5, metrics={'x': 1})" in caplog.messages


def test_the_reported_dict_is_copied(on_cluster: FakeRun) -> None:
    metrics = {"x": 1}
    with core.init() as ctx:
        ctx.train.report_training_metrics(1, metrics)
        metrics["x"] = 2
        ctx.train.report_training_metrics(2, metrics)
    assert [m for _, _, m in _metric_events(on_cluster)] == [{"x": 1}, {"x": 2}]


def test_none_validation_value_is_refused(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        with pytest.raises(RuntimeError) as err:
            ctx.train.report_validation_metrics(1, {"acc": None})
    assert str(err.value) == "Validation metric 'acc' returned an invalid scalar value: None"
    assert on_cluster.events() == []


def test_bytes_validation_values_are_dropped_with_a_warning(
    on_cluster: FakeRun, caplog: pytest.LogCaptureFixture
) -> None:
    with core.init() as ctx:
        ctx.train.report_validation_metrics(1, {"acc": 0.5, "blob": b"xx"})
    assert "Removed non serializable metrics: blob" in caplog.messages
    assert _metric_events(on_cluster) == [("validation", 1, {"acc": 0.5})]


@pytest.mark.parametrize(
    ("group", "message"),
    [("", "metric group must be a non-empty string, not ''"),
     ("a.b", "metric group cannot contain '.'")],
)
def test_group_names(on_cluster: FakeRun, group: str, message: str) -> None:
    with core.init() as ctx, pytest.raises(ValueError) as err:
        ctx.train.report_metrics(group, 1, {"x": 1})
    assert str(err.value) == message


def test_epoch_must_be_numeric(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        ctx.train.report_training_metrics(1, {"epoch": 1.5, "epochs": 2})
        with pytest.raises(ValueError) as err:
            ctx.train.report_training_metrics(2, {"epoch": "one"})
    assert str(err.value) == "cannot add metric with non numeric 'epoch' value got one"


def test_same_step_merges_and_refuses_conflicts(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        ctx.train.report_validation_metrics(10, {"a": 1.0})
        ctx.train.report_validation_metrics(10, {"a": 1.0, "b": 2.0})
        ctx.train.report_training_metrics(10, {"a": 5.0})  # another group
        with pytest.raises(ValueError) as err:
            ctx.train.report_validation_metrics(10, {"b": 3.0})
        assert str(err.value) == (
            "overwriting existing metric keys is not supported, conflicting key: b"
        )
        with pytest.raises(ValueError):
            ctx.train.report_validation_metrics(10, {"a": 9.0, "c": 1.0})
        ctx.train.report_validation_metrics(10, {"c": float("nan")})
        ctx.train.report_validation_metrics(10, {"c": float("nan")})
    assert len(on_cluster.bodies("metrics")) == 5


def test_batch_metrics_of_a_step_cannot_be_replaced(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        ctx.train.report_training_metrics(1, {"x": 1}, batch_metrics=[{"x": 1}])
        with pytest.raises(ValueError, match="overwriting batch metrics is not supported"):
            ctx.train.report_training_metrics(1, {"x": 1}, batch_metrics=[{"x": 1}])


def test_unserializable_values_fail_at_report_time(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        with pytest.raises(TypeError, match="metric 'x' is a object"):
            ctx.train.report_training_metrics(1, {"x": object()})
        with pytest.raises(TypeError, match="steps_completed must be an int"):
            ctx.train.report_training_metrics(1.5, {"x": 1})  # type: ignore[arg-type]
    assert on_cluster.events() == []


def test_non_finite_values_are_encoded_as_determined_does(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        ctx.train.report_training_metrics(1, {"nan": float("nan"), "inf": float("inf")})
    text = (on_cluster.run_dir / "events.jsonl").read_text()
    assert '"nan":"NaN"' in text and '"inf":"Infinity"' in text


def test_progress_must_be_a_fraction(on_cluster: FakeRun) -> None:
    with core.init() as ctx, pytest.raises(ValueError) as err:
        ctx.train.report_progress(1.5)
    assert str(err.value) == "Progress should be between 0 and 1, not 1.5"


def test_best_validation_comes_from_control_json(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        assert ctx.train.get_experiment_best_validation() is None
        write_atomic(
            on_cluster.run_dir / "control.json",
            {"preempt": False, "reason": "", "best_validation": 0.25},
        )
        assert ctx.train.get_experiment_best_validation() == 0.25


def test_early_exit_is_reported_once(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        ctx.train.report_early_exit(core.EarlyExitReason.USER_REQUESTED_STOP)
        ctx.train.report_early_exit(core.EarlyExitReason.INVALID_HP)
    assert on_cluster.bodies("early_exit") == [
        {"reason": "USER_REQUESTED_STOP", "time": on_cluster.bodies("early_exit")[0]["time"]}
    ]


def test_invalid_hp_reports_early_exit_and_exits_zero(on_cluster: FakeRun) -> None:
    with pytest.raises(SystemExit) as exit_info, core.init():
        raise core.InvalidHP("lr too large")
    assert exit_info.value.code == 0
    assert [b["reason"] for b in on_cluster.bodies("early_exit")] == ["INVALID_HP"]


def test_tensorboard(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        path = ctx.train.get_tensorboard_path()
        assert path == on_cluster.checkpoint_dir / "hpcdet/tensorboard/experiment/3/trial/7"
        assert path.is_dir()
        with pytest.raises(RuntimeError) as err:
            ctx.train.upload_tensorboard_files()
    assert str(err.value) == "upload_tensorboard_files can only be used in MANUAL mode"
    with core.init(tensorboard_mode=core.TensorboardMode.MANUAL) as ctx:
        ctx.train.upload_tensorboard_files()


def test_multi_slot_task_needs_a_distributed_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = make_run(tmp_path, slot_ids=[0, 1])
    monkeypatch.setenv("HPCDET_CLUSTER_INFO", str(run.info_path))
    with pytest.raises(ValueError) as err:
        core.init()
    assert str(err.value) == "you must provide a valid DistributedContext for a multi-slot task"


def test_one_open_context_per_run(on_cluster: FakeRun) -> None:
    with core.init():
        with pytest.raises(RuntimeError, match="another core.init\\(\\) context is open"):
            core.init()
    with core.init() as ctx:
        ctx.train.report_training_metrics(1, {"x": 1})
    assert [e.seq for e in on_cluster.events()] == [1]


def test_what_the_daemon_decides_on_is_written_within_a_second_without_close(
        on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        ctx.train.report_validation_metrics(1, {"x": 1})
        deadline = time.monotonic() + 3
        while not on_cluster.events() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(on_cluster.events()) == 1


def test_a_failed_background_write_surfaces_on_the_next_report(on_cluster: FakeRun) -> None:
    ctx = core.init()
    ctx.start()
    try:
        (on_cluster.run_dir / "events.jsonl").mkdir()  # appending to it now fails
        ctx.train.report_validation_metrics(1, {"x": 1})  # written within a second
        time.sleep(1.5)
        with pytest.raises(RuntimeError, match="writing the event log .* failed"):
            ctx.train.report_training_metrics(2, {"x": 2})
    finally:
        (on_cluster.run_dir / "events.jsonl").rmdir()
    ctx.train.report_training_metrics(3, {"x": 3})
    ctx.close()
    # Step 1 stayed buffered through the failed write; the failing call did not report step 2.
    assert [b["steps_completed"] for b in on_cluster.bodies("metrics")] == [1, 3]


def test_off_cluster_reports_only_log(off_cluster: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hpcdet.core")
    with core.init() as ctx:
        assert ctx.info is None
        ctx.train.report_training_metrics(1, {"x": 1})
        ctx.train.report_progress(0.1)
        assert ctx.train.get_experiment_best_validation() is None
    assert "report_training_metrics(steps_completed=1, metrics={'x': 1})" in caplog.messages


def test_events_of_an_unclosed_context_are_written_at_exit(fake_run: FakeRun) -> None:
    code = (
        "from hpcdet import core\n"
        "ctx = core.init()\n"
        "ctx.train.report_training_metrics(1, {'x': 1})\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=fake_run.env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert _metric_events(fake_run) == [("training", 1, {"x": 1})]


def test_metadata_merges_nested_dicts_and_a_later_run_starts_from_it(
    on_cluster: FakeRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    with core.init() as ctx:
        ctx.train.set_metadata({"a": {"x": 1, "y": [1]}, "b": 1})
        ctx.train.set_metadata({"a": {"y": [2]}, "c": None})
        assert ctx.train.get_metadata() == {"a": {"x": 1, "y": [2]}, "b": 1, "c": None}
        ctx.train.get_metadata()["a"]["x"] = 99  # a copy: changing it changes nothing
        with pytest.raises(TypeError, match="metadata must be a dict"):
            ctx.train.set_metadata([1])  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="metadata must be JSON"):
            ctx.train.set_metadata({"f": object()})
    stored = on_cluster.bodies("metadata")[-1]["metadata"]
    assert stored == {"a": {"x": 1, "y": [2]}, "b": 1, "c": None}
    later = on_cluster.next_run(metadata=stored)
    monkeypatch.setenv("HPCDET_CLUSTER_INFO", str(later.info_path))
    with core.init() as ctx:
        assert ctx.train.get_metadata() == stored


def test_alerts_are_events_with_a_level(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        ctx.alert("t1", "d1")
        ctx.alert(title="t2", level="ERROR")
        with pytest.raises(ValueError, match="alert level must be one of"):
            ctx.alert("t3", level="loud")
    assert [(b["title"], b["description"], b["level"]) for b in on_cluster.bodies("alert")] == [
        ("t1", "d1", "info"), ("t2", "", "error")]


def test_off_cluster_metadata_and_alerts_only_log(
    off_cluster: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO), core.init() as ctx:
        ctx.train.set_metadata({"a": 1})
        assert ctx.train.get_metadata() == {"a": 1}
        ctx.alert("offline", "no cluster")
    assert "alert: offline: no cluster" in caplog.text


def test_off_cluster_tensorboard_path_is_private_and_never_anothers(
    off_cluster: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37: the fixed /tmp/hpcdet-tensorboard could be made first by another user, who
    then read and planted files in it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    planted = tmp_path / "hpcdet-tensorboard"
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)
    if os.geteuid() == 0:
        os.chown(planted, 65534, 65534)
    with core.init() as ctx:
        path = ctx.train.get_tensorboard_path()
        assert ctx.train.get_tensorboard_path() == path
    assert path.parent == tmp_path and path != planted
    assert path.stat().st_uid == os.geteuid() and stat.S_IMODE(path.stat().st_mode) == 0o700
    with core.init() as other:
        assert other.train.get_tensorboard_path() != path
