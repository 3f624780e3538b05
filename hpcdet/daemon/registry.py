"""The model registry: models made and checkpoints registered as their versions, journaled in
the registry's own journal (``Journal.record_registry``)."""

from __future__ import annotations

from typing import Any

from hpcdet.daemon.configs import Configs
from hpcdet.daemon.journal import Journal
from hpcdet.errors import NotFoundError, StateError, UsageError
from hpcdet.paths import StatePaths
from hpcdet.states import CheckpointState
from hpcdet.store.entries import ModelCreated, ModelVersionRegistered
from hpcdet.store.repository import Store

MAX_NAME = 255


def check_model_name(name: str) -> None:
    """A name a model may have; a UsageError says what is wrong with another.

    Not all digits, as Determined refuses them: a model is also found by its id there."""
    what = None
    if not name.strip():
        what = "is empty"
    elif name != name.strip():
        what = "starts or ends with white space"
    elif "/" in name:
        what = "holds '/'"
    elif any(not c.isprintable() for c in name):
        what = "holds a control character"
    elif name.isdigit():
        what = "is all digits"
    elif len(name) > MAX_NAME:
        what = f"is longer than {MAX_NAME} characters"
    if what is not None:
        raise UsageError(f"model name {name!r} {what}; give a name of letters, digits and "
                         "punctuation other than '/', e.g. `hpcdet model create mnist-cnn`")


class Registry:
    def __init__(self, store: Store, journal: Journal, configs: Configs, paths: StatePaths
                 ) -> None:
        self.store = store
        self.journal = journal
        self.configs = configs
        self.paths = paths

    def create_model(self, name: str, description: str, metadata: dict[str, Any]) -> str:
        check_model_name(name)
        if any(m.name == name for m in self.store.models()):
            raise StateError(f"a model named {name!r} already exists (`hpcdet model describe "
                             f"{name}`); choose another name")
        self.journal.record_registry(ModelCreated(name=name, description=description,
                                                  metadata=metadata))
        return f"Created model {name!r}"

    def register_version(self, name: str, uuid: str) -> int:
        """The checkpoint registered as the model's next version; returns the version."""
        model = self.store.model(name)
        try:
            ckpt = self.store.checkpoint(uuid)
        except NotFoundError:
            raise NotFoundError(f"checkpoint {uuid} not found; `hpcdet checkpoint list "
                                "EXPERIMENT_ID` shows an experiment's checkpoints") from None
        if ckpt.state != CheckpointState.COMPLETED:
            raise StateError(f"checkpoint {uuid} is {ckpt.state}, not COMPLETED; register a "
                             "completed one (`hpcdet checkpoint list EXPERIMENT_ID`)")
        cfg = self.configs.get(self.store.experiment(ckpt.experiment_id))
        version = max((v.version for v in model.versions), default=0) + 1
        self.journal.record_registry(ModelVersionRegistered(
            model=name, version=version, uuid=uuid, experiment_id=ckpt.experiment_id,
            trial_id=ckpt.trial_id, steps_completed=ckpt.steps_completed,
            storage=str(cfg.checkpoint_dir(self.paths.default_checkpoints()))))
        return version
