"""Checkpoints ranked by the searcher metric, and where a checkpoint's files are."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcdet.checkpoint_gc import CheckpointRecord, GCPolicy, ValidationRecord, best, latest, rank
from hpcdet.config import ExperimentConfig
from hpcdet.daemon.jobspec import trusted_storage
from hpcdet.errors import NotFoundError, StateError
from hpcdet.paths import StatePaths
from hpcdet.private import PrivacyError, check_owned, download_target
from hpcdet.records import CheckpointRecord as Checkpoint
from hpcdet.records import ExperimentRecord as Experiment
from hpcdet.states import CheckpointState
from hpcdet.store.queries import Queries


@dataclass(frozen=True)
class RankedCheckpoint:
    checkpoint: Checkpoint
    metric: float | None  # the searcher metric its trial reported at its steps

    @property
    def files(self) -> int:
        return len(self.checkpoint.resources)

    @property
    def size(self) -> int:
        return sum(int(v) for v in self.checkpoint.resources.values())


@dataclass(frozen=True)
class CheckpointList:
    storage: Path  # each checkpoint is the directory <storage>/<uuid>
    checkpoints: list[RankedCheckpoint]


@dataclass(frozen=True)
class StoredCheckpoint:
    checkpoint: Checkpoint
    source: Path  # its directory in the checkpoint storage
    validation: dict[str, Any]  # the validation metrics reported at its steps ({} if none)


def ranked_checkpoints(
    store: Queries, paths: StatePaths, exp_id: int, top: int | None = None, *,
    trial_id: int | None = None, sort_by: str | None = None,
    smaller_is_better: bool | None = None, ordered: bool = False,
) -> CheckpointList:
    """The experiment's (or one trial's) completed checkpoints in ``rank`` order; with
    ``top``, only the best ``top`` by the searcher metric (or ``sort_by``), best first, those
    without the metric left out. ``ordered``: all of them, best first, those without the
    metric after the others (latest first), as Determined's ``list_checkpoints`` gives them;
    ``top`` then keeps the first ``top``."""
    exp = store.experiment(exp_id)
    cfg = _config(exp)
    metric = sort_by or cfg.searcher.metric
    smaller = cfg.searcher.smaller_is_better if smaller_is_better is None else smaller_is_better
    ckpts = {c.uuid: c for c in store.checkpoints(exp_id=exp_id, trial_id=trial_id)}
    validations = [
        ValidationRecord(m.trial_id, m.steps_completed, m.metrics)
        for m in store.experiment_metrics(exp_id, "validation")
    ]
    records = [CheckpointRecord(c.uuid, c.trial_id, c.steps_completed, c.reported)
               for c in ckpts.values()]
    ranked = rank(records, validations, metric)
    if ordered:
        ranked = [*best(ranked, smaller), *latest(r for r in ranked if r.metric is None)]
    elif top is not None:
        ranked = best(ranked, smaller)
    if top is not None:
        ranked = ranked[:top]
    return CheckpointList(cfg.checkpoint_dir(paths.default_checkpoints()),
                          [RankedCheckpoint(ckpts[r.checkpoint.uuid], r.metric) for r in ranked])


def stored_checkpoint(store: Queries, paths: StatePaths, uuid: str) -> StoredCheckpoint:
    """A completed checkpoint whose files are in its storage, to copy from."""
    ckpt = store.checkpoint(uuid)
    if ckpt.state != CheckpointState.COMPLETED:
        raise StateError(
            f"checkpoint {uuid} is {ckpt.state}; only COMPLETED checkpoints can be downloaded"
        )
    cfg = _config(store.experiment(ckpt.experiment_id))
    source = cfg.checkpoint_dir(paths.default_checkpoints()) / uuid
    if not source.is_dir():
        raise NotFoundError(f"checkpoint {uuid} is missing from its storage: no {source}")
    untrusted = trusted_storage(cfg, paths)
    if untrusted is not None:
        raise PrivacyError(f"checkpoint {uuid} is not downloaded: its experiment's "
                           f"checkpoint_storage.host_path: {untrusted}")
    check_owned(source)
    return StoredCheckpoint(ckpt, source, checkpoint_validation(store, ckpt))


def default_destination(uuid: str, dest: Path | None) -> Path:
    return dest if dest is not None else Path("checkpoints") / uuid


def checkpoint_files(source: Path) -> list[tuple[str, int, int]]:
    """Each file a copy of the checkpoint directory ``source`` holds, as ``copy_checkpoint``
    copies it (through symlinks): (path relative to it, size, mode)."""
    found = []
    for root, dirs, names in os.walk(source, followlinks=True):
        dirs.sort()
        for name in sorted(names):
            path = Path(root, name)
            st = path.stat()
            found.append((path.relative_to(source).as_posix(), st.st_size,
                          stat.S_IMODE(st.st_mode)))
    return found


def checkpoint_listing(store: Queries, paths: StatePaths, uuid: str,
                       dest: Path | None) -> dict[str, Any]:
    """What a laptop needs to fetch a completed checkpoint over SFTP instead of
    ``copy_checkpoint`` (checked as that checks it): its directory here, where it goes there,
    and its files (``checkpoint_files``)."""
    source = stored_checkpoint(store, paths, uuid).source
    return {"uuid": uuid, "source": str(source), "dest": str(default_destination(uuid, dest)),
            "files": checkpoint_files(source)}


def copy_checkpoint(store: Queries, paths: StatePaths, uuid: str, dest: Path | None) -> Path:
    """Copy a completed checkpoint's files to ``dest`` (default ``checkpoints/<uuid>``).

    ``dest`` must be new, or an empty directory of the user's that nobody else can write, in
    a directory only the user (or root, with a sticky bit) can change: the files are copied
    into a fresh private directory beside it, which is then renamed into place, so nothing
    planted there (a symlink to a file of the user's) is followed or overwritten.
    """
    stored = stored_checkpoint(store, paths, uuid)
    given = default_destination(uuid, dest)
    target = download_target(given)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        shutil.copytree(stored.source, staging / "copy")
        os.chmod(staging / "copy", 0o700)
        os.replace(staging / "copy", target)
    except (OSError, shutil.Error) as e:
        raise StateError(f"cannot download checkpoint {uuid} from {stored.source} into "
                         f"{target}: {_why(e)}") from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return given


def _why(e: OSError | shutil.Error) -> str:
    if isinstance(e, shutil.Error):  # one (source, destination, reason) per file that failed
        errors = e.args[0] if e.args and isinstance(e.args[0], list) else []
        return "; ".join(str(err[2]) for err in errors[:3]) or str(e)
    return f"{e.strerror or e}" + (f": {e.filename}" if e.filename else "")


def checkpoint_validation(store: Queries, ckpt: Checkpoint) -> dict[str, Any]:
    """The validation metrics its trial reported at its steps ({} if none)."""
    merged: dict[str, Any] = {}
    for m in store.metrics(ckpt.trial_id, "validation"):
        if m.steps_completed == ckpt.steps_completed:
            merged.update(m.metrics)
    return merged


def _config(exp: Experiment) -> ExperimentConfig:
    return exp.config


def doomed_checkpoints(store: Queries, exp_id: int, policy: GCPolicy) -> list[Checkpoint]:
    """The checkpoints a new GC policy would delete now (`experiment set gc-policy` shows
    them before it asks): what the daemon's retention will delete."""
    return store.doomed_checkpoints(exp_id, _config(store.experiment(exp_id)), policy)
