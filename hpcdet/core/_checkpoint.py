"""Checkpoints on shared-filesystem storage (``core_context.checkpoint``).

A checkpoint is the directory ``<storage>/<uuid>/`` holding the user's files and
``metadata.json``. Trials write into it in place (zero-copy) and then report it; restoring
reads it in place too. Only a shared filesystem is supported: compute nodes and the login
node see the same storage directory.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hpcdet.core._distributed import DistributedContext
from hpcdet.core._events import RunEvents
from hpcdet.errors import NotFoundError
from hpcdet.private import copy_file
from hpcdet.rundir.atomic import read_json

logger = logging.getLogger("hpcdet.core")

METADATA_FILE = "metadata.json"


class CheckpointNotFound(NotFoundError):
    """No checkpoint with the given storage id exists in the checkpoint storage."""


class DownloadMode(enum.Enum):
    """How the workers of one node share a checkpoint download."""

    LocalWorkersShareDownload = "LOCAL_WORKERS_SHARE_DOWNLOAD"
    NoSharedDownload = "NO_SHARED_DOWNLOAD"


def resolve_storage(checkpoint_storage: str | dict[str, Any] | None, default: Path) -> Path:
    """The checkpoint base directory for ``core.init(checkpoint_storage=...)``.

    Args:
        checkpoint_storage: A directory path, a ``{"type": "directory", "container_path": p}``
            dict, or ``None`` for ``default``.
        default: The base directory to use when nothing is given.

    Raises:
        ValueError: Object storage (``s3://``, ``gs://``, ...), a ``shared_fs`` dict (as in
            Determined), or an unknown storage type.
    """
    if checkpoint_storage is None:
        return default
    if isinstance(checkpoint_storage, str):
        if "://" in checkpoint_storage:
            raise ValueError(
                f"hpcdet keeps checkpoints on a shared filesystem; {checkpoint_storage!r} is "
                "not a directory. Pass a directory path, e.g. checkpoint_storage="
                '"/scratch/me/checkpoints"'
            )
        return Path(checkpoint_storage).expanduser().absolute()
    if isinstance(checkpoint_storage, dict):
        kind = checkpoint_storage.get("type")
        if kind == "shared_fs":
            raise ValueError(
                "Cannot configure a shared_fs checkpoint storage with a dictionary. Use a string "
                "or a configuration file."
            )
        if kind == "directory" and checkpoint_storage.get("container_path"):
            return Path(str(checkpoint_storage["container_path"])).expanduser().absolute()
        raise ValueError(
            f"unsupported checkpoint_storage {checkpoint_storage!r}; pass a directory path, or "
            '{"type": "directory", "container_path": "/a/dir"}'
        )
    raise TypeError(
        f"checkpoint_storage must be a str, a dict or None, not {type(checkpoint_storage)}"
    )


def list_resources(path: Path) -> dict[str, int]:
    """Every file (``relpath: size``) and directory (``"relpath/": 0``) under ``path``."""
    resources: dict[str, int] = {}
    for root, dirs, files in os.walk(path):
        rel = Path(root).relative_to(path)
        for d in dirs:
            resources[(rel / d).as_posix() + "/"] = 0
        for f in files:
            resources[(rel / f).as_posix()] = (Path(root) / f).stat().st_size
    return dict(sorted(resources.items()))


def merge_metadata(a: dict[str, Any], b: dict[str, Any], where: str = "") -> dict[str, Any]:
    """Recursive union of two metadata dicts; a key with two different values is an error."""
    out = dict(a)
    for k, v in b.items():
        if k in out and isinstance(out[k], dict) and isinstance(v, dict):
            out[k] = merge_metadata(out[k], v, f"{where}{k}.")
        elif k in out and out[k] != v:
            raise ValueError(
                f"sharded checkpoint metadata conflicts at key '{where}{k}': "
                f"{out[k]!r} != {v!r}; give each key the same value on every worker"
            )
        else:
            out[k] = v
    return out


def _copy_tree(src: Path, dst: Path, selector: Callable[[str], bool] | None) -> None:
    if not src.is_dir():
        raise FileNotFoundError(f"checkpoint directory {src} does not exist")
    for root, dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        if selector is None:
            for d in dirs:
                (dst / rel / d).mkdir(parents=True, exist_ok=True)
        for f in files:
            relpath = (rel / f).as_posix()
            if selector is None or selector(relpath):
                (dst / rel).mkdir(parents=True, exist_ok=True)
                copy_file(Path(root) / f, dst / rel / f)


class _CheckpointStore:
    """Storage operations shared by the on-cluster and the off-cluster checkpoint contexts."""

    def __init__(self, dist: DistributedContext, base_dir: Path) -> None:
        self._dist = dist
        self._base = base_dir

    def _report(self, storage_id: str, metadata: dict[str, Any], resources: dict[str, int]) -> None:
        raise NotImplementedError

    def _deleted(self, storage_id: str) -> None:
        raise NotImplementedError

    def _path(self, storage_id: str) -> Path:
        if not storage_id or storage_id in (".", "..") or Path(storage_id).name != storage_id:
            raise ValueError(f"{storage_id!r} is not a checkpoint storage id")
        return self._base / storage_id

    def _existing(self, storage_id: str) -> Path:
        path = self._path(storage_id)
        if not path.is_dir():
            raise CheckpointNotFound(f"Did not find checkpoint {storage_id} in shared_fs storage")
        return path

    @contextlib.contextmanager
    def store_path(
        self, metadata: dict[str, Any] | None = None, *, shard: bool = False
    ) -> Iterator[tuple[Path, str]]:
        """Yield ``(path, storage_id)`` of a new checkpoint directory, then report it.

        The directory is the checkpoint itself (zero-copy). On exit ``metadata.json`` is
        written into it and the checkpoint is reported with its file list. If the block
        raises, the unreported directory is removed (unless ``shard``).

        Args:
            metadata: JSON-able dict; on-cluster it must contain ``steps_completed``.
            shard: Every worker calls in step and writes its own files into the same
                directory; metadata dicts are merged. Without it only the chief may call.

        Raises:
            RuntimeError: ``shard=False`` on a non-chief worker.
            ValueError: On-cluster metadata without ``steps_completed`` (after the files were
                written, as in Determined).
        """
        if metadata is not None and not isinstance(metadata, dict):
            raise TypeError(f"checkpoint metadata must be a dict, not {type(metadata).__name__}")
        rank = self._dist.rank
        if not shard and rank != 0:
            raise RuntimeError(
                "cannot call CheckpointContext.store_path(shard=False) from non-chief worker "
                f"(rank={rank})"
            )
        new_id = str(uuid.uuid4())
        storage_id: str = self._dist.broadcast(new_id) if shard else new_id
        path = self._path(storage_id)
        path.mkdir(parents=True, exist_ok=shard)
        try:
            yield path, storage_id
        except BaseException:
            if not shard:
                shutil.rmtree(path, ignore_errors=True)
            raise
        all_metadata = self._dist.allgather(metadata) if shard else [metadata]
        if rank != 0:
            return
        merged: dict[str, Any] = {}
        for m in all_metadata:
            merged = merge_metadata(merged, m or {})
        self._finish(path, storage_id, merged)

    def _finish(self, path: Path, storage_id: str, metadata: dict[str, Any]) -> None:
        with open(path / METADATA_FILE, "w") as f:
            json.dump(metadata, f, indent=2)
        self._report(storage_id, metadata, list_resources(path))

    def upload(
        self,
        ckpt_dir: str | os.PathLike[str] | None,
        metadata: dict[str, Any] | None = None,
        *,
        shard: bool = False,
        selector: Callable[[str], bool] | None = None,
    ) -> str:
        """Copy a local directory into a new checkpoint, report it and return its storage id.

        Args:
            ckpt_dir: The directory to copy (its name is not kept). With ``shard`` a worker
                with nothing to add passes ``None``.
            metadata: As for :meth:`store_path`.
            shard: Collective upload from every worker; see :meth:`store_path`.
            selector: Copy only files whose relative path it accepts.

        Raises:
            RuntimeError: ``shard=False`` on a non-chief worker or without ``ckpt_dir``, or
                ``shard=True`` and no worker gave a directory.
        """
        if not shard:
            if self._dist.rank != 0:
                raise RuntimeError(
                    "cannot call CheckpointContext.upload(shard=False) from non-chief worker "
                    f"(rank={self._dist.rank})"
                )
            if ckpt_dir is None:
                raise RuntimeError("upload(shard=False) needs a ckpt_dir to upload")
        elif not any(self._dist.allgather(ckpt_dir is not None)):
            raise RuntimeError("upload(shard=True) needs a ckpt_dir from at least one worker")
        with self.store_path(metadata, shard=shard) as (path, storage_id):
            if ckpt_dir is not None:
                _copy_tree(Path(ckpt_dir), path, selector)
        return storage_id

    def download(
        self,
        storage_id: str,
        ckpt_dir: str | os.PathLike[str],
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Callable[[str], bool] | None = None,
    ) -> None:
        """Copy checkpoint ``storage_id`` into ``ckpt_dir`` (created if needed).

        With ``LocalWorkersShareDownload`` every worker of a node calls in step and only local
        rank 0 copies; with ``NoSharedDownload`` every caller copies on its own.

        Raises:
            CheckpointNotFound: No such checkpoint.
        """
        mode = DownloadMode(download_mode)
        if mode == DownloadMode.NoSharedDownload:
            _copy_tree(self._existing(storage_id), Path(ckpt_dir), selector)
            return
        error: str | None = None
        if self._dist.local_rank == 0:
            try:
                _copy_tree(self._existing(storage_id), Path(ckpt_dir), selector)
            except Exception as e:
                error = str(e)
                if self._dist.local_size < 2:
                    raise
        # Workers of the node wait for the copy and fail together if it failed.
        error = self._dist.broadcast_local(error)
        if error is not None:
            raise RuntimeError(f"local rank 0 failed to download checkpoint: {error}")

    @contextlib.contextmanager
    def restore_path(
        self,
        storage_id: str,
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Callable[[str], bool] | None = None,
    ) -> Iterator[Path]:
        """Yield the directory of checkpoint ``storage_id``, read in place (do not modify it).

        Raises:
            CheckpointNotFound: No such checkpoint.
        """
        path = self._existing(storage_id)
        if selector is not None:
            logger.warning("selector ignored: shared_fs checkpoints are read in place")
        yield path

    def get_metadata(self, storage_id: str) -> dict[str, Any]:
        """The metadata the checkpoint was reported with (its ``metadata.json``).

        Raises:
            CheckpointNotFound: No such checkpoint.
        """
        data = read_json(self._existing(storage_id) / METADATA_FILE, {})
        return data if isinstance(data, dict) else {}

    def delete(self, storage_id: str) -> None:
        """Delete every file of checkpoint ``storage_id`` and report the deletion.

        Raises:
            CheckpointNotFound: No such checkpoint.
        """
        shutil.rmtree(self._existing(storage_id))
        self._deleted(storage_id)


class CheckpointContext(_CheckpointStore):
    """Stores, restores and reports a trial's checkpoints in its checkpoint storage.

    Args:
        dist: The trial's distributed context.
        base_dir: The storage directory; created on the first checkpoint.
        events: The run's event log, which receives ``checkpoint`` events.
    """

    def __init__(self, dist: DistributedContext, base_dir: Path, events: RunEvents) -> None:
        super().__init__(dist, base_dir)
        self._events = events

    def _report(self, storage_id: str, metadata: dict[str, Any], resources: dict[str, int]) -> None:
        if "steps_completed" not in metadata:
            raise ValueError(
                "metadata for reported checkpoints, in the current implementation, requires a "
                "'steps_completed' item, which has not been provided"
            )
        body = {
            "uuid": storage_id,
            "steps_completed": _check_steps(metadata["steps_completed"]),
            "metadata": metadata,
            "resources": resources,
        }
        # Flushed at once: the daemon's latest checkpoint must never lag a preemption exit.
        self._events.emit("checkpoint", body, flush=True)
        logger.info("reported checkpoint %s", storage_id)

    def _deleted(self, storage_id: str) -> None:
        self._events.emit("checkpoint_deleted", {"uuid": storage_id}, flush=True)


class DummyCheckpointContext(_CheckpointStore):
    """Off-cluster checkpoints: same storage behaviour, reports are only logged."""

    def _report(self, storage_id: str, metadata: dict[str, Any], resources: dict[str, int]) -> None:
        logger.info("saved checkpoint %s in %s", storage_id, self._base)

    def _deleted(self, storage_id: str) -> None:
        logger.info("deleted checkpoint %s", storage_id)


def _check_steps(value: Any) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ValueError(f"metadata['steps_completed'] must be an int, not {value!r}")
    return int(value)
