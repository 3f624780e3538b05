"""The requests the daemon serves, as types. The CLI sends them through ``hpcdet.link``;
``Commands`` carries them out. On the wire (``hpcdet.daemon.requests``) each is
``{"op": NAME, "args": {field: value}}``; ``decode`` checks a request before any of it runs."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, Union

from hpcdet.errors import HpcdetError
from hpcdet.ids import check_id


@dataclass(frozen=True)
class Ping:
    NAME: ClassVar[str] = "ping"


@dataclass(frozen=True)
class Shutdown:
    NAME: ClassVar[str] = "shutdown"


@dataclass(frozen=True)
class Create:
    """``staging``: the context snapshot, which becomes the daemon's once taken;
    ``request_id``: the CLI's, so that the request carried out again answers the same;
    ``python``: the ``python3`` on the CLI's PATH, which trials run with when neither the
    config nor the cluster config names one; ``paused``: created paused (`create --paused`),
    its trials wait for `experiment activate`; ``convert``: the CLI converts the trials'
    image on the login node once created (the daemon takes the pull lock for it)."""

    NAME: ClassVar[str] = "create"
    config: dict[str, Any]
    staging: str
    request_id: str = ""
    python: str = ""
    paused: bool = False
    convert: bool = False


@dataclass(frozen=True)
class Pause:
    NAME: ClassVar[str] = "pause"
    exp_id: int


@dataclass(frozen=True)
class Activate:
    NAME: ClassVar[str] = "activate"
    exp_id: int


@dataclass(frozen=True)
class Cancel:
    NAME: ClassVar[str] = "cancel"
    exp_id: int


@dataclass(frozen=True)
class Kill:
    NAME: ClassVar[str] = "kill"
    exp_id: int


@dataclass(frozen=True)
class Continue:
    """``config``: overrides, for an experiment with the single searcher only."""

    NAME: ClassVar[str] = "continue"
    exp_id: int
    config: dict[str, Any] | None = None


@dataclass(frozen=True)
class ContinueTrial:
    NAME: ClassVar[str] = "continue_trial"
    trial_id: int


@dataclass(frozen=True)
class DeleteCheckpoint:
    NAME: ClassVar[str] = "delete_checkpoint"
    uuid: str


@dataclass(frozen=True)
class SetExperiment:
    """What describes an experiment: ``field`` is name, description, labels_add,
    labels_remove or archived."""

    NAME: ClassVar[str] = "set_experiment"
    exp_id: int
    field: str
    value: Any


@dataclass(frozen=True)
class DeleteExperiment:
    NAME: ClassVar[str] = "delete_experiment"
    exp_id: int


@dataclass(frozen=True)
class KillTrial:
    NAME: ClassVar[str] = "kill_trial"
    trial_id: int


@dataclass(frozen=True)
class UpdateJobs:
    """Each update: {"job": experiment id, "field": ..., "value": ...}, checked all before any
    is applied."""

    NAME: ClassVar[str] = "update_jobs"
    updates: list[dict[str, Any]]


Operation = Union[Ping, Shutdown, Create, Pause, Activate, Cancel, Kill, Continue,
                  ContinueTrial, DeleteCheckpoint, SetExperiment, DeleteExperiment, KillTrial,
                  UpdateJobs]
_BY_NAME: dict[str, type[Any]] = {cls.NAME: cls for cls in (
    Ping, Shutdown, Create, Pause, Activate, Cancel, Kill, Continue, ContinueTrial,
    DeleteCheckpoint, SetExperiment, DeleteExperiment, KillTrial, UpdateJobs)}
# Arguments that name a stored experiment or trial (a create's request_id is the CLI's own).
_ID_ARGS = frozenset({"exp_id", "trial_id"})


def encode(operation: Operation) -> tuple[str, dict[str, Any]]:
    """The request's name and the fields that differ from their defaults: a request that asks
    nothing newer than a running daemon knows is one that daemon takes (``decode`` refuses an
    argument it does not know)."""
    return operation.NAME, {f.name: getattr(operation, f.name) for f in fields(operation)
                            if f.default is MISSING or getattr(operation, f.name) != f.default}


def decode(op: str, args: dict[str, Any]) -> Operation:
    cls = _BY_NAME.get(op)
    if cls is None:
        raise HpcdetError(f"unknown request {op!r}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(args) - names)
    if unknown:
        raise HpcdetError(f"request {op!r} has no argument {', '.join(unknown)}; this CLI and "
                          "the daemon are of different hpcdet versions: restart the daemon")
    for key in _ID_ARGS.intersection(args):  # SQLite cannot even look up other ids
        check_id(key, args[key])
    try:
        operation: Operation = cls(**args)
    except TypeError as e:
        raise HpcdetError(f"request {op!r}: {e}") from None
    return operation
