"""det.get_cluster_info() from the record the harness writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcdet import core
from tests.unit.core.core_fakes import FakeRun, make_run


def test_off_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HPCDET_CLUSTER_INFO", raising=False)
    assert core.get_cluster_info() is None


def test_trial_fields(on_cluster: FakeRun) -> None:
    info = core.get_cluster_info()
    assert info is not None
    assert info is core.get_cluster_info()  # cached
    assert (info.master_url, info.session_token, info.task_type) == ("", "", "TRIAL")
    assert (info.task_id, info.allocation_id, info.agent_id) == ("3.7", "7.1", "node0")
    assert (info.slot_ids, info.container_addrs, info.container_rank) == ([0], ["127.0.0.1"], 0)
    assert info.container_slot_counts == [1]
    assert info.gpu_uuids == []
    assert info.latest_checkpoint is None
    assert info.user_data == {}
    trial = info.trial
    assert (trial.trial_id, trial.experiment_id, trial.trial_seed) == (7, 3, 42)
    assert trial.hparams == {"increment_by": 2}
    assert trial._config["searcher"]["name"] == "single"
    assert (trial._steps_completed, trial._trial_run_id) == (0, 1)


def test_resumed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(
        tmp_path, run_id=3, config={"data": {"url": "x"}}, latest_checkpoint="abc",
        steps_completed=40,
    )
    monkeypatch.setenv("HPCDET_CLUSTER_INFO", str(run.info_path))
    info = core.get_cluster_info()
    assert info is not None
    assert info.latest_checkpoint == "abc"
    assert info.user_data == {"url": "x"}
    assert (info.trial._steps_completed, info.trial._trial_run_id) == (40, 3)


def test_non_trial_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(tmp_path, task_type="COMMAND", latest_checkpoint="abc")
    monkeypatch.setenv("HPCDET_CLUSTER_INFO", str(run.info_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    info = core.get_cluster_info()
    assert info is not None
    assert info.latest_checkpoint is None and info.user_data == {}
    with pytest.raises(RuntimeError, match="only available in trials"):
        _ = info.trial
    with core.init() as ctx:
        assert isinstance(ctx.train, core.DummyTrainContext)
        assert isinstance(ctx.checkpoint, core.DummyCheckpointContext)


def test_missing_record_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCDET_CLUSTER_INFO", str(tmp_path / "gone.json"))
    with pytest.raises(RuntimeError, match="does not exist"):
        core.get_cluster_info()
