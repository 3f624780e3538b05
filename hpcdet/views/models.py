"""The model registry as the faces read it: models, their versions, a version's checkpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpcdet.errors import NotFoundError, StateError
from hpcdet.records import ModelRecord, ModelVersionRecord

if TYPE_CHECKING:
    from hpcdet.store.queries import Queries


def models(store: Queries) -> list[ModelRecord]:
    return store.models()


def model(store: Queries, name: str) -> ModelRecord:
    return store.model(name)


def version(store: Queries, name: str, number: int | None = None) -> ModelVersionRecord:
    """Version ``number`` of the model (1, 2, ...; -1 or None: the latest)."""
    m = store.model(name)
    if not m.versions:
        raise NotFoundError(f"model {name!r} has no versions yet; register a checkpoint with "
                            f"`hpcdet model register-version {name} CHECKPOINT_UUID`")
    if number is None or number == -1:
        return m.versions[-1]
    found = [v for v in m.versions if v.version == number]
    if not found:
        raise NotFoundError(f"model {name!r} has no version {number}; it has versions "
                            f"1 to {m.versions[-1].version} (`hpcdet model describe {name}`)")
    return found[0]


def downloadable(store: Queries, v: ModelVersionRecord) -> str:
    """The uuid of the version's checkpoint, to download as any checkpoint; a StateError
    saying where its files are when its experiment was deleted (they stay)."""
    try:
        store.checkpoint(v.uuid)
    except NotFoundError:
        raise StateError(
            f"version {v.version} of model {v.model!r} is checkpoint {v.uuid}, whose "
            f"experiment {v.experiment_id} was deleted; its files are kept in "
            f"{v.storage}/{v.uuid}: copy them from there") from None
    return v.uuid


def model_dict(m: ModelRecord) -> dict[str, Any]:
    return {"name": m.name, "description": m.description, "metadata": m.metadata,
            "creation_time": m.created, "versions": [version_dict(v) for v in m.versions]}


def version_dict(v: ModelVersionRecord) -> dict[str, Any]:
    return {"model": v.model, "version": v.version, "checkpoint_uuid": v.uuid,
            "experiment_id": v.experiment_id, "trial_id": v.trial_id,
            "steps_completed": v.steps_completed, "storage": v.storage,
            "creation_time": v.registered}
