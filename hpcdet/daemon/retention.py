"""Checkpoint retention: the experiment's GC policy applied to its ended trials' checkpoints,
and deleting a checkpoint (journaled, then its files removed)."""

from __future__ import annotations

import shutil

from hpcdet.checkpoint_gc import (
    RetentionPolicy,
)
from hpcdet.daemon.configs import Configs
from hpcdet.daemon.journal import Journal
from hpcdet.errors import StateError
from hpcdet.paths import StatePaths
from hpcdet.records import CheckpointRecord as Checkpoint
from hpcdet.records import ExperimentRecord as Experiment
from hpcdet.store.entries import CheckpointDeleted
from hpcdet.store.repository import Store


class Retention:
    def __init__(self, store: Store, journal: Journal, configs: Configs, paths: StatePaths
                 ) -> None:
        self.store = store
        self.journal = journal
        self.configs = configs
        self.paths = paths

    def collect(self, exp: Experiment) -> None:
        """Apply the GC policy to the checkpoints of the experiment's ended trials."""
        cfg = self.configs.get(exp)
        for ckpt in self.store.doomed_checkpoints(exp.id, cfg,
                                       cfg.checkpoint_storage or RetentionPolicy()):
            self.delete(ckpt)

    def delete(self, ckpt: Checkpoint) -> None:
        """Delete a checkpoint; refused (StateError) for one registered as a model version."""
        registered = self.store.registered([ckpt.uuid]).get(ckpt.uuid)
        if registered:
            v = registered[0]
            raise StateError(
                f"checkpoint {ckpt.uuid} is version {v.version} of model {v.model!r} in the "
                "model registry, which keeps it; `hpcdet model describe "
                f"{v.model}` shows its versions")
        cfg = self.configs.get(self.store.experiment(ckpt.experiment_id))
        self.journal.record(ckpt.experiment_id,
                            CheckpointDeleted(uuid=ckpt.uuid, trial_id=ckpt.trial_id))
        storage = cfg.checkpoint_dir(self.paths.default_checkpoints())
        shutil.rmtree(storage / ckpt.uuid, ignore_errors=True)
