"""Where the SDK's objects (``hpcdet.client``) read and act: the ``Source`` they call, and
``Local``, this machine's daemon and database. A laptop's SDK calls a cluster's ``Local``
through ``hpcdet.remote.sdk.RemoteSource`` and the login node's `hpcdet relay sdk`; what a
``Source`` returns is plain data, so that it crosses as JSON unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from hpcdet.link import connect
from hpcdet.paths import StatePaths, state_dir
from hpcdet.records import CheckpointRecord as CheckpointRow
from hpcdet.store.queries import Queries
from hpcdet.views import usage
from hpcdet.views.access import read_store
from hpcdet.views.checkpoints import (
    checkpoint_listing,
    checkpoint_validation,
    copy_checkpoint,
    ranked_checkpoints,
)
from hpcdet.views.experiments import experiment_rows
from hpcdet.views.models import model, model_dict, models
from hpcdet.views.trials import trial_dict, trial_metrics


def _paths() -> StatePaths:
    return StatePaths(state_dir())


_stores: dict[Path, Queries] = {}


def _store() -> Queries:
    """One read-only database per state directory for the process: a notebook's objects each
    read it, and opening it anew checks the daemon's host and makes an engine every time."""
    paths = _paths()
    if paths.root not in _stores:
        _stores[paths.root] = read_store(paths)
    return _stores[paths.root]


class Source(Protocol):
    """Where the SDK's objects read and act: this machine's daemon and database (``Local``),
    or a cluster's over SSH (``hpcdet.remote.sdk.RemoteSource``, which runs ``Local`` there).
    What it returns is plain data, the same either way."""

    def experiment(self, exp_id: int) -> dict[str, Any]: ...
    def experiments(self) -> list[dict[str, Any]]: ...
    def trial(self, trial_id: int) -> dict[str, Any]: ...
    def trials(self, exp_id: int) -> list[int]: ...
    def checkpoint(self, uuid: str) -> dict[str, Any]: ...
    def metrics(self, trial_id: int, group: str | None) -> list[dict[str, Any]]: ...
    def ranked(self, exp_id: int, limit: int | None, trial_id: int | None,
               sort_by: str | None, smaller_is_better: bool | None,
               ordered: bool) -> list[str]: ...
    def send(self, op: str, args: dict[str, Any]) -> object: ...
    def create(self, config: dict[str, Any], model_dir: Path, includes: list[Path]) -> int: ...
    def download(self, uuid: str, dest: Path | None) -> str: ...
    def models(self) -> list[dict[str, Any]]: ...
    def model(self, name: str) -> dict[str, Any]: ...


class Local:
    """The SDK's data from this machine's daemon and database."""

    def experiment(self, exp_id: int) -> dict[str, Any]:
        store = _store()
        row = store.experiment(exp_id)
        runs = store.runs([t.id for t in store.trials(exp_id)])
        return {"name": row.name, "state": str(row.state), "config": row.stored_config,
                "labels": list(row.labels), "description": row.description,
                "archived": row.archived, "progress": row.progress,
                "usage": usage.total(runs, usage.slots_of(row.stored_config)).to_dict()}

    def experiments(self) -> list[dict[str, Any]]:
        return [{"id": r.experiment.id, "labels": list(r.experiment.labels),
                 "state": str(r.experiment.state), "name": r.experiment.name}
                for r in experiment_rows(_store())]

    def trial(self, trial_id: int) -> dict[str, Any]:
        store = _store()
        row = store.trial(trial_id)
        facts = trial_dict(row)
        slots = usage.slots_of(store.experiment(row.experiment_id).stored_config)
        return {"experiment_id": row.experiment_id, "hparams": facts["hparams"],
                "state": str(row.state), "metadata": facts["metadata"],
                "usage": usage.total(store.runs([trial_id]), slots).to_dict(),
                "summary_metrics": {"best_validation": row.best_validation,
                                    "steps_completed": row.steps_completed}}

    def trials(self, exp_id: int) -> list[int]:
        return [t.id for t in _store().trials(exp_id)]

    def checkpoint(self, uuid: str) -> dict[str, Any]:
        store = _store()
        row: CheckpointRow = store.checkpoint(uuid)
        return {"state": str(row.state), "reported": row.reported, "metadata": row.metadata,
                "resources": row.resources, "steps_completed": row.steps_completed,
                "experiment_id": row.experiment_id, "trial_id": row.trial_id,
                "hparams": store.trial(row.trial_id).hparams,
                "validation": checkpoint_validation(store, row),
                "experiment_config": store.experiment(row.experiment_id).stored_config}

    def metrics(self, trial_id: int, group: str | None) -> list[dict[str, Any]]:
        return [{"run_id": m.run_id, "steps_completed": m.steps_completed,
                 "reported": m.reported, "metrics": m.metrics, "group": m.group,
                 "batch_metrics": m.batch_metrics}
                for m in trial_metrics(_store(), trial_id, group).rows]

    def ranked(self, exp_id: int, limit: int | None, trial_id: int | None,
               sort_by: str | None, smaller_is_better: bool | None,
               ordered: bool) -> list[str]:
        listed = ranked_checkpoints(_store(), _paths(), exp_id, limit, trial_id=trial_id,
                                    sort_by=sort_by, smaller_is_better=smaller_is_better,
                                    ordered=ordered)
        return [c.checkpoint.uuid for c in listed.checkpoints]

    def send(self, op: str, args: dict[str, Any]) -> object:
        from hpcdet.protocol.calls import call

        return call(_paths(), op, args)

    def create(self, config: dict[str, Any], model_dir: Path, includes: list[Path],
               request_id: str | None = None) -> int:
        created = connect(_paths()).create(config, model_dir, includes=includes,
                                           request_id=request_id)
        return created.experiment_id

    def download(self, uuid: str, dest: Path | None) -> str:
        return str(copy_checkpoint(_store(), _paths(), uuid, dest))

    def models(self) -> list[dict[str, Any]]:
        return [model_dict(m) for m in models(_store())]

    def model(self, name: str) -> dict[str, Any]:
        return model_dict(model(_store(), name))

    def listing(self, uuid: str, dest: str | None) -> dict[str, Any]:
        """For a laptop's download (``hpcdet.remote.sdk``): the files it fetches."""
        return checkpoint_listing(_store(), _paths(), uuid, None if dest is None else Path(dest))
