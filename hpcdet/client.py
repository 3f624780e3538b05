"""The Python SDK on the login node: Determined's ``determined.experimental.client``, for
notebooks and scripts, over the same views and daemon link as the CLI.

    from hpcdet import client

    exp = client.create_experiment("const.yaml", "model_dir")
    exp.wait()
    best = exp.top_checkpoint()
    path = best.download()

There is no master to log in to: the user's own daemon (started when needed) is the cluster.
``client.as_determined()`` makes ``from determined.experimental import client`` give this
module, for scripts written for Determined (see its docstring).
"""

from __future__ import annotations

import datetime
import importlib.util
import sys
import time
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hpcdet.config import load_experiment_config
from hpcdet.errors import HpcdetError, NotFoundError, StateError
from hpcdet.protocol.messages import (
    Activate,
    Cancel,
    CreateModel,
    DeleteCheckpoint,
    DeleteExperiment,
    Kill,
    KillTrial,
    Pause,
    RegisterVersion,
    Request,
    SetExperiment,
    encode,
)
from hpcdet.sdk_source import Local, Source
from hpcdet.states import FINAL_EXPERIMENT_STATES, CheckpointState, ExperimentState, TrialState

__all__ = [
    "Checkpoint",
    "CheckpointState",
    "Experiment",
    "ExperimentState",
    "Model",
    "ModelVersion",
    "Trial",
    "TrialMetrics",
    "TrialState",
    "as_determined",
    "create_experiment",
    "create_model",
    "get_checkpoint",
    "get_experiment",
    "get_model",
    "get_models",
    "get_trial",
    "iter_trials_metrics",
    "list_experiments",
    "login",
]


def _unused(call: str, given: dict[str, Any]) -> None:
    """Determined's arguments hpcdet has nothing for are named, never dropped silently."""
    named = sorted(k for k, v in given.items() if v is not None)
    if named:
        warnings.warn(f"{call}: {', '.join(named)} accepted but not applied (hpcdet has no "
                      "master, workspaces, projects or templates)", stacklevel=3)


def login(master: str | None = None, user: str | None = None, password: str | None = None,
          cluster: str | None = None, **rest: Any) -> None:
    """``cluster``: drive that cluster's daemon from here, over SSH (a profile of `hpcdet
    cluster add`; ``"local"``: this machine's again). Without it there is nothing to do:
    there is no master, and the daemon is the user's own; the rest is accepted so that
    scripts written for Determined run unchanged, and named in a warning."""
    global _remote
    _unused("login", {"master": master, "user": user, "password": password and "***", **rest})
    if cluster is None:
        return
    if cluster == "local":
        _remote = None
        return
    from hpcdet.remote.profiles import load
    from hpcdet.remote.sdk import RemoteSource

    _remote = RemoteSource(load().get(cluster))


_remote: Source | None = None  # hpcdet.remote.sdk.RemoteSource after login(cluster=...)


def _source() -> Source:
    return _remote or Local()


def _send(request: Request[Any]) -> None:
    _source().send(*encode(request))

# ----------------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class TrialMetrics:
    """One report of a trial, as Determined's SDK gives it."""

    trial_id: int
    trial_run_id: int
    steps_completed: int
    end_time: datetime.datetime
    metrics: dict[str, Any]
    group: str
    batch_metrics: list[dict[str, Any]] | None = None

    @property
    def total_batches(self) -> int:
        """Determined's older name of ``steps_completed``."""
        return self.steps_completed


def iter_trials_metrics(trial_ids: list[int], group: str | None = None
                        ) -> Iterator[TrialMetrics]:
    """Every report of these trials (of one group, or all), trial by trial."""
    for trial_id in trial_ids:
        yield from Trial(trial_id).iter_metrics(group)


# -------------------------------------------------------------------------------- checkpoints


class Checkpoint:
    """A completed (or deleted) checkpoint. ``training`` holds its experiment and trial, the
    trial's hyperparameters and the validation metrics reported at its steps."""

    def __init__(self, uuid: str) -> None:
        self.uuid = uuid
        self.reload()

    def reload(self) -> None:
        row = _source().checkpoint(self.uuid)
        self.state = CheckpointState(row["state"])
        self.report_time = datetime.datetime.fromtimestamp(row["reported"],
                                                           datetime.timezone.utc)
        self.metadata: dict[str, Any] = row["metadata"]
        self.resources: dict[str, int] = row["resources"]
        self.steps_completed: int = row["steps_completed"]
        self.training = types.SimpleNamespace(
            experiment_id=row["experiment_id"], trial_id=row["trial_id"],
            hparams=row["hparams"], validation_metrics={"avgMetrics": row["validation"]},
            experiment_config=row["experiment_config"],
        )

    def download(self, path: str | Path | None = None, mode: str = "auto") -> str:
        """Copy its files from the checkpoint storage to ``path`` (default
        ``checkpoints/<uuid>``); returns the path. ``mode`` is accepted for Determined's
        sake; every download here is direct, and ``"master"`` is refused."""
        if str(mode) == "master":
            raise HpcdetError("mode 'master' downloads through Determined's master, which "
                              "hpcdet does not have; use 'direct' or 'auto'")
        return _source().download(self.uuid, Path(path) if path is not None else None)

    def delete(self) -> None:
        _send(DeleteCheckpoint(self.uuid))

    def __repr__(self) -> str:
        return f"Checkpoint(uuid={self.uuid})"


def _ranked(exp_id: int, limit: int | None, trial_id: int | None = None,
            sort_by: str | None = None, smaller_is_better: bool | None = None,
            ordered: bool = False) -> list[Checkpoint]:
    return [Checkpoint(uuid) for uuid in _source().ranked(
        exp_id, limit, trial_id, sort_by, smaller_is_better, ordered)]


def _top(exp_id: int, trial_id: int | None, sort_by: str | None,
         smaller_is_better: bool | None) -> Checkpoint:
    found = _ranked(exp_id, 1, trial_id, sort_by, smaller_is_better)
    if not found:
        whose = f"trial {trial_id}" if trial_id is not None else f"experiment {exp_id}"
        raise NotFoundError(f"{whose} has no checkpoint with a validation metric to rank it by")
    return found[0]


# ------------------------------------------------------------------------------------- trials


class Trial:
    """A trial: ``id``, ``experiment_id``, ``hparams``, ``state``, ``summary_metrics``."""

    def __init__(self, trial_id: int) -> None:
        self.id = trial_id
        self.reload()

    def reload(self) -> None:
        row = _source().trial(self.id)
        self.experiment_id: int = row["experiment_id"]
        self.hparams: dict[str, Any] = row["hparams"]
        self.state = TrialState(row["state"])
        self.metadata: dict[str, Any] = row["metadata"]
        self.summary_metrics: dict[str, Any] = row["summary_metrics"]
        # hpcdet's: the slot-hours (GPU-hours) of its ended runs, {unit, hours, sources, running}
        self.usage: dict[str, Any] = row.get("usage", {})

    def iter_metrics(self, group: str | None = None) -> Iterator[TrialMetrics]:
        """Its reports, in order (``group``: "training", "validation" or another)."""
        for m in _source().metrics(self.id, group):
            yield TrialMetrics(
                self.id, m["run_id"], m["steps_completed"],
                datetime.datetime.fromtimestamp(m["reported"], datetime.timezone.utc),
                m["metrics"], m["group"], m["batch_metrics"])

    def list_checkpoints(self, max_results: int | None = None) -> list[Checkpoint]:
        """All its completed checkpoints, best first by the searcher metric, those without
        it last (latest first), as Determined lists them."""
        return _ranked(self.experiment_id, max_results or None, self.id, ordered=True)

    def top_checkpoint(self, sort_by: str | None = None,
                       smaller_is_better: bool | None = None) -> Checkpoint:
        """Its best checkpoint by the searcher metric (or ``sort_by``)."""
        return _top(self.experiment_id, self.id, sort_by, smaller_is_better)

    def kill(self) -> None:
        _send(KillTrial(self.id))

    def get_experiment(self) -> Experiment:
        return Experiment(self.experiment_id)

    def __repr__(self) -> str:
        return f"Trial(id={self.id})"


# -------------------------------------------------------------------------------- experiments


class Experiment:
    """An experiment: ``id``, ``name``, ``state``, ``config``, ``labels``, ``description``,
    ``archived``, ``progress``; ``reload()`` reads them again."""

    def __init__(self, experiment_id: int) -> None:
        self.id = experiment_id
        self.reload()

    def reload(self) -> None:
        row = _source().experiment(self.id)
        self.name: str = row["name"]
        self.state = ExperimentState(row["state"])
        self.config: dict[str, Any] = row["config"]
        self.labels: list[str] = list(row["labels"])
        self.description: str = row["description"]
        self.archived: bool = row["archived"]
        self.progress: float = row["progress"]
        # hpcdet's: the slot-hours (GPU-hours) of its ended runs, {unit, hours, sources, running}
        self.usage: dict[str, Any] = row.get("usage", {})

    def wait(self, interval: float = 5.0) -> ExperimentState:
        """Until it ends; returns its final state.

        Raises:
            ValueError: it is paused, and would never end.
        """
        while True:
            self.reload()
            if self.state in FINAL_EXPERIMENT_STATES:
                return self.state
            if self.state == ExperimentState.PAUSED:
                raise ValueError(f"Experiment {self.id} is paused; activate it to wait for it")
            time.sleep(interval)

    def list_trials(self) -> list[Trial]:
        return [Trial(t) for t in _source().trials(self.id)]

    def list_checkpoints(self, max_results: int | None = None) -> list[Checkpoint]:
        """All its completed checkpoints, best first by the searcher metric, those without
        it last (latest first), as Determined lists them."""
        return _ranked(self.id, max_results or None, ordered=True)

    def top_checkpoint(self, sort_by: str | None = None,
                       smaller_is_better: bool | None = None) -> Checkpoint:
        """Its best checkpoint by the searcher metric (or ``sort_by``)."""
        return _top(self.id, None, sort_by, smaller_is_better)

    def top_n_checkpoints(self, limit: int, sort_by: str | None = None,
                          smaller_is_better: bool | None = None) -> list[Checkpoint]:
        return _ranked(self.id, limit, None, sort_by, smaller_is_better)

    def get_metrics(self, group: str | None = None) -> Iterator[TrialMetrics]:
        """Every report of every trial of it (of one group, or all)."""
        return iter_trials_metrics([t.id for t in self.list_trials()], group)

    def pause(self) -> None:
        _send(Pause(self.id))

    def activate(self) -> None:
        _send(Activate(self.id))

    def cancel(self) -> None:
        _send(Cancel(self.id))

    def kill(self) -> None:
        _send(Kill(self.id))

    def archive(self) -> None:
        _send(SetExperiment(self.id, "archived", True))

    def unarchive(self) -> None:
        _send(SetExperiment(self.id, "archived", False))

    def add_label(self, label: str) -> None:
        _send(SetExperiment(self.id, "labels_add", label))

    def remove_label(self, label: str) -> None:
        _send(SetExperiment(self.id, "labels_remove", label))

    def set_name(self, name: str) -> None:
        _send(SetExperiment(self.id, "name", name))

    def set_description(self, description: str) -> None:
        _send(SetExperiment(self.id, "description", description))

    def delete(self) -> None:
        _send(DeleteExperiment(self.id))

    def __repr__(self) -> str:
        return f"Experiment(id={self.id})"


# ------------------------------------------------------------------------------ the registry


class ModelVersion:
    """A checkpoint registered as a model's ``model_version``-th version."""

    def __init__(self, row: dict[str, Any]) -> None:
        self.model_name: str = row["model"]
        self.model_version: int = row["version"]
        self.checkpoint_uuid: str = row["checkpoint_uuid"]
        self.creation_time = datetime.datetime.fromtimestamp(row["creation_time"],
                                                             datetime.timezone.utc)

    @property
    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self.checkpoint_uuid)

    def __repr__(self) -> str:
        return f"ModelVersion(model={self.model_name!r}, version={self.model_version})"


class Model:
    """A model of the registry: a name, a description, metadata, and its versions."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.reload()

    def reload(self) -> None:
        row = _source().model(self.name)
        self.description: str = row["description"]
        self.metadata: dict[str, Any] = row["metadata"]
        self.creation_time = datetime.datetime.fromtimestamp(row["creation_time"],
                                                             datetime.timezone.utc)
        self._versions = [ModelVersion(v) for v in row["versions"]]

    def register_version(self, checkpoint: str | Checkpoint) -> ModelVersion:
        """Register a completed checkpoint (or its uuid) as the next version; checkpoint GC
        keeps it from then on."""
        uuid = checkpoint.uuid if isinstance(checkpoint, Checkpoint) else str(checkpoint)
        request = RegisterVersion(self.name, uuid)
        number = request.reply(_source().send(*encode(request)))
        registered = self.get_version(number)
        assert registered is not None
        return registered

    def get_version(self, version: int = -1) -> ModelVersion | None:
        """Version ``version`` (1, 2, ...; -1, the latest), or None if the model has no
        versions yet."""
        self.reload()
        if not self._versions:
            return None
        if version == -1:
            return self._versions[-1]
        for v in self._versions:
            if v.model_version == version:
                return v
        raise NotFoundError(f"model {self.name!r} has no version {version}; it has versions "
                            f"1 to {self._versions[-1].model_version}")

    def get_versions(self, order_by: Any = "desc") -> list[ModelVersion]:
        """Every version, the latest first (``order_by="asc"``: version 1 first), as
        Determined's ``order_by=OrderBy.DESC`` default."""
        self.reload()
        ascending = str(getattr(order_by, "name", order_by)).lower().startswith("asc")
        return list(self._versions if ascending else reversed(self._versions))

    def __repr__(self) -> str:
        return f"Model(name={self.name!r})"


def create_model(name: str, description: str = "", metadata: dict[str, Any] | None = None,
                 **rest: Any) -> Model:
    """A new model of the registry, with no versions yet."""
    _unused("create_model", rest)
    _send(CreateModel(name, description or "", metadata))
    return Model(name)


def get_model(name: str) -> Model:
    return Model(name)


def get_models(name: str = "", **rest: Any) -> list[Model]:
    """The registry's models by name (those whose name holds ``name``, if given)."""
    _unused("get_models", rest)
    return [Model(m["name"]) for m in _source().models() if name in m["name"]]


def create_experiment(
    config: str | Path | dict[str, Any], model_dir: str | Path | None = None,
    includes: list[str | Path] | None = None, **rest: Any,
) -> Experiment:
    """Create an experiment from a config (a file, YAML text or a dict) with ``model_dir``
    (default: the current directory) as its context."""
    if isinstance(config, dict):
        source: str | Path = yaml.safe_dump(config) + "\n"
    elif isinstance(config, Path) or "\n" not in config:
        source = Path(config)
    else:
        source = config
    _unused("create_experiment", rest)
    cfg = load_experiment_config(source)
    return Experiment(_source().create(cfg.raw, Path(model_dir or "."),
                                       [Path(i) for i in includes or []]))


def get_experiment(experiment_id: int) -> Experiment:
    return Experiment(experiment_id)


def get_trial(trial_id: int) -> Trial:
    return Trial(trial_id)


def get_checkpoint(uuid: str) -> Checkpoint:
    return Checkpoint(uuid)


def list_experiments(labels: list[str] | None = None, states: list[Any] | None = None,
                     name: str | None = None, **rest: Any) -> list[Experiment]:
    """Experiments, oldest first, filtered by every label given, state and name."""
    _unused("list_experiments", rest)
    wanted = set(labels or ())
    kept = {str(ExperimentState(str(s).removeprefix("STATE_"))) for s in states or ()}
    return [Experiment(e["id"]) for e in _source().experiments()
            if wanted <= set(e["labels"]) and (not kept or e["state"] in kept)
            and (name is None or e["name"] == name)]


def as_determined() -> None:
    """Make ``from determined.experimental import client`` give this module, for scripts
    written for Determined's SDK. Opt-in, for this interpreter only: nothing is installed,
    so a real Determined elsewhere is never shadowed.

    Raises:
        StateError: a real ``determined`` package is installed here; import it, or this
            module as ``hpcdet.client``, not both under one name.
    """
    current = sys.modules.get("determined")
    real = (importlib.util.find_spec("determined") is not None if current is None
            else not getattr(current, "IS_HPCDET_SHIM", False))
    if real:
        raise StateError("a real Determined is installed in this environment: use "
                         "`from hpcdet import client` for hpcdet's SDK instead")
    import hpcdet.shim.determined as det

    experimental = types.ModuleType("determined.experimental")
    experimental.client = sys.modules[__name__]  # type: ignore[attr-defined]
    det.experimental = experimental  # type: ignore[attr-defined]
    sys.modules.update({"determined": det, "determined.experimental": experimental,
                        "determined.experimental.client": sys.modules[__name__]})
