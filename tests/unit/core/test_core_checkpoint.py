"""core_context.checkpoint on shared-filesystem storage, on and off the cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcdet import core
from hpcdet.core._context import RunEvents
from hpcdet.errors import NotFoundError
from tests.unit.core.core_fakes import FakeRun


def _two_workers(rank: int) -> core.DistributedContext:
    return core.DistributedContext(
        rank=rank, size=2, local_rank=rank, local_size=2, cross_rank=0, cross_size=1,
        transport=core.Transport(),
    )


def test_store_path_writes_in_place_then_reports(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        ctx.train.report_training_metrics(5, {"x": 1})
        with ctx.checkpoint.store_path({"steps_completed": 5, "note": "hi"}) as (path, uuid):
            assert path == on_cluster.checkpoint_dir / uuid
            (path / "state").write_text("abc")
            (path / "sub").mkdir()
            (path / "sub" / "w.bin").write_bytes(b"0123456789")
        # Flushed at the checkpoint: the daemon sees it, and the metrics before it, at once.
        assert [e.type for e in on_cluster.events()] == ["metrics", "checkpoint"]
    metadata_text = (path / "metadata.json").read_text()
    assert metadata_text == json.dumps({"steps_completed": 5, "note": "hi"}, indent=2)
    body = on_cluster.bodies("checkpoint")[0]
    assert body["uuid"] == uuid
    assert body["steps_completed"] == 5
    assert body["metadata"] == {"steps_completed": 5, "note": "hi"}
    assert body["resources"] == {
        "metadata.json": len(metadata_text), "state": 3, "sub/": 0, "sub/w.bin": 10
    }


def test_steps_completed_is_required_after_the_files_are_written(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        with pytest.raises(ValueError) as err:
            with ctx.checkpoint.store_path({"epoch": 1}) as (path, _):
                (path / "state").write_text("abc")
    assert str(err.value) == (
        "metadata for reported checkpoints, in the current implementation, requires a "
        "'steps_completed' item, which has not been provided"
    )
    assert (path / "state").exists() and (path / "metadata.json").exists()
    assert on_cluster.bodies("checkpoint") == []


def test_a_failed_store_leaves_nothing_behind(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        with pytest.raises(KeyError):
            with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, _):
                (path / "half").write_text("x")
                raise KeyError("crash while saving")
    assert not path.exists()
    assert on_cluster.events() == []


def test_restore_get_metadata_download_delete(on_cluster: FakeRun, tmp_path: Path) -> None:
    with core.init() as ctx:
        with ctx.checkpoint.store_path({"steps_completed": 3}) as (path, uuid):
            (path / "state").write_text("3")
        with ctx.checkpoint.restore_path(uuid) as restored:
            assert restored == path
            assert (restored / "state").read_text() == "3"
        assert ctx.checkpoint.get_metadata(uuid) == {"steps_completed": 3}
        ctx.checkpoint.download(uuid, tmp_path / "copy")
        assert (tmp_path / "copy" / "state").read_text() == "3"
        ctx.checkpoint.delete(uuid)
        assert not path.exists()
        with pytest.raises(core.CheckpointNotFound):
            ctx.checkpoint.delete(uuid)
    assert [b["uuid"] for b in on_cluster.bodies("checkpoint_deleted")] == [uuid]


def test_missing_checkpoint(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        with pytest.raises(core.CheckpointNotFound) as err:
            with ctx.checkpoint.restore_path("nope"):
                pass
        with pytest.raises(ValueError, match="is not a checkpoint storage id"):
            ctx.checkpoint.get_metadata("../trials")
    assert str(err.value) == "Did not find checkpoint nope in shared_fs storage"
    assert isinstance(err.value, NotFoundError)


def test_upload_copies_a_directory_with_a_selector(on_cluster: FakeRun, tmp_path: Path) -> None:
    src = tmp_path / "local"
    (src / "deep").mkdir(parents=True)
    (src / "keep.pt").write_text("k")
    (src / "deep" / "keep.pt").write_text("kk")
    (src / "skip.tmp").write_text("s")
    with core.init() as ctx:
        uuid = ctx.checkpoint.upload(
            src, {"steps_completed": 7}, selector=lambda p: p.endswith(".pt")
        )
    stored = on_cluster.checkpoint_dir / uuid
    assert sorted(p.relative_to(stored).as_posix() for p in stored.rglob("*")) == [
        "deep", "deep/keep.pt", "keep.pt", "metadata.json"
    ]
    assert on_cluster.bodies("checkpoint")[0]["steps_completed"] == 7


def test_checkpoint_storage_argument(on_cluster: FakeRun, tmp_path: Path) -> None:
    with core.init(checkpoint_storage=str(tmp_path / "mine")) as ctx:
        with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, _):
            assert path.parent == tmp_path / "mine"
    with pytest.raises(ValueError) as err:
        core.init(checkpoint_storage={"type": "shared_fs", "host_path": "/tmp"})
    assert str(err.value) == (
        "Cannot configure a shared_fs checkpoint storage with a dictionary. Use a string or a "
        "configuration file."
    )
    with pytest.raises(ValueError, match="shared filesystem"):
        core.init(checkpoint_storage="s3://bucket/prefix")


def test_only_the_chief_stores_unsharded(tmp_path: Path) -> None:
    ckpt = core.CheckpointContext(_two_workers(1), tmp_path, RunEvents(None))
    with pytest.raises(RuntimeError) as err:
        with ckpt.store_path({"steps_completed": 1}):
            pass
    assert str(err.value) == (
        "cannot call CheckpointContext.store_path(shard=False) from non-chief worker (rank=1)"
    )
    assert list(tmp_path.iterdir()) == []


def test_sharded_store_is_a_collective(tmp_path: Path) -> None:
    ckpt = core.CheckpointContext(_two_workers(0), tmp_path, RunEvents(None))
    with pytest.raises(NotImplementedError, match="has no transport for its collectives"):
        with ckpt.store_path({"steps_completed": 1}, shard=True):
            pass


def test_off_cluster_checkpoints_go_to_the_user_data_dir(off_cluster: Path) -> None:
    with core.init() as ctx:
        assert isinstance(ctx.checkpoint, core.DummyCheckpointContext)
        with ctx.checkpoint.store_path() as (path, uuid):  # no steps_completed needed
            (path / "state").write_text("1")
        with ctx.checkpoint.restore_path(uuid) as restored:
            assert restored == off_cluster / uuid
        assert ctx.checkpoint.get_metadata(uuid) == {}
