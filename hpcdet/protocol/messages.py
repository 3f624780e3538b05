"""The requests the daemon serves and its replies, as types: the one definition the faces (CLI,
SDK, web UI, through ``hpcdet.link``) and the daemon (``hpcdet.daemon.commands``) share.

Each request is a frozen dataclass that names its reply type: ``Request[str]`` is answered with
what the CLI prints, ``Request[Created]`` with a new experiment. On the wire each is
``{"op": NAME, "args": {field: value}}`` and its reply the reply's JSON (``wire``/``reply``);
``decode`` checks a request before any of it runs. The wire is the one today's main wrote, so
a request left on disk across an upgrade is served as it was meant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, ClassVar, Generic, TypeVar

from hpcdet.errors import HpcdetError

R = TypeVar("R")
Q = TypeVar("Q", bound="Request[Any]")

# Every request type by its wire name, filled as each is defined.
REQUESTS: dict[str, type[Request[Any]]] = {}
# Arguments that name a stored experiment or trial, which the daemon checks as ids before it
# looks them up (a create's request_id is the CLI's own).
ID_FIELDS = frozenset({"exp_id", "trial_id"})


class Request(Generic[R]):
    """A request whose reply is an ``R``. A subclass that sets ``NAME`` is a request type."""

    NAME: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("NAME")
        if name is not None:
            if name in REQUESTS:
                raise TypeError(f"two requests named {name!r}")
            REQUESTS[name] = cls

    def reply(self, result: object) -> R:
        """The reply from its JSON."""
        raise NotImplementedError

    def wire(self, reply: R) -> object:
        """The reply as JSON."""
        raise NotImplementedError


# ------------------------------------------------------------------------------------ replies


@dataclass(frozen=True)
class Created:
    """A new experiment: its id, its first trials, and what the user should know."""

    experiment_id: int
    trial_ids: list[int]
    warning: str = ""
    # The image its trials run in (hpcdet.containers.ContainerSpec as a dict), which the CLI
    # converts on the login node while the jobs wait for it.
    image: dict[str, Any] | None = None
    # The holder of the image's pull lock the daemon took for the CLI (hpcdet.images.reserve).
    image_reserved: str = ""

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> Created:
        return cls(int(reply["experiment_id"]), [int(t) for t in reply.get("trial_ids", [])],
                   str(reply.get("warning") or ""), reply.get("image"),
                   str(reply.get("image_reserved") or ""))


@dataclass(frozen=True)
class Pong:
    """Where the daemon that answered runs."""

    pid: int
    host: str


class Said(Request[str]):
    """A request answered with what the CLI prints."""

    def reply(self, result: object) -> str:
        return "" if result is None else str(result)

    def wire(self, reply: str) -> object:
        return reply


class Creates(Request[Created]):
    """A request answered with the experiment it created."""

    def reply(self, result: object) -> Created:
        if not isinstance(result, dict):
            raise HpcdetError(f"the daemon answered {self.NAME!r} with {result!r}, not an "
                              "experiment; restart it (`hpcdet daemon stop`)")
        return Created.from_reply(result)

    def wire(self, reply: Created) -> object:
        return asdict(reply)


# ----------------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class Ping(Request[Pong]):
    NAME: ClassVar[str] = "ping"

    def reply(self, result: object) -> Pong:
        got = result if isinstance(result, dict) else {}
        return Pong(int(got.get("pid", 0)), str(got.get("host", "")))

    def wire(self, reply: Pong) -> object:
        return asdict(reply)


@dataclass(frozen=True)
class Shutdown(Said):
    NAME: ClassVar[str] = "shutdown"


@dataclass(frozen=True)
class CopyDatabase(Said):
    """A copy of the database in the shared state directory for a reader on another host,
    which cannot reach the daemon's local disk; answered with its path."""

    NAME: ClassVar[str] = "copy_database"


@dataclass(frozen=True)
class Create(Creates):
    """``staging``: the context snapshot, which becomes the daemon's once taken;
    ``request_id``: the CLI's, so that the request carried out again answers the same;
    ``python``: the ``python3`` on the CLI's PATH, which trials run with when neither the
    config nor the cluster config names one; ``paused``: created paused (`create --paused`),
    its trials wait for `experiment activate`; ``convert``: the CLI converts the trials'
    image on the login node once created (the daemon takes the pull lock for it);
    ``task``: an interactive task's kind (``hpcdet.config.task``), "" for an experiment."""

    NAME: ClassVar[str] = "create"
    config: dict[str, Any]
    staging: str
    request_id: str = ""
    python: str = ""
    paused: bool = False
    convert: bool = False
    task: str = ""


@dataclass(frozen=True)
class Pause(Said):
    NAME: ClassVar[str] = "pause"
    exp_id: int


@dataclass(frozen=True)
class Activate(Said):
    NAME: ClassVar[str] = "activate"
    exp_id: int


@dataclass(frozen=True)
class Cancel(Said):
    NAME: ClassVar[str] = "cancel"
    exp_id: int


@dataclass(frozen=True)
class Kill(Said):
    NAME: ClassVar[str] = "kill"
    exp_id: int


@dataclass(frozen=True)
class Continue(Said):
    """``config``: overrides, for an experiment with the single searcher only."""

    NAME: ClassVar[str] = "continue"
    exp_id: int
    config: dict[str, Any] | None = None


@dataclass(frozen=True)
class ContinueTrial(Creates):
    NAME: ClassVar[str] = "continue_trial"
    trial_id: int


@dataclass(frozen=True)
class DeleteCheckpoint(Said):
    NAME: ClassVar[str] = "delete_checkpoint"
    uuid: str


@dataclass(frozen=True)
class SetExperiment(Said):
    """What describes an experiment, or a setting that may change while it runs: ``field``
    is name, description, labels_add, labels_remove, archived, max_slots or gc_policy."""

    NAME: ClassVar[str] = "set_experiment"
    exp_id: int
    field: str
    value: Any


@dataclass(frozen=True)
class DeleteExperiment(Said):
    NAME: ClassVar[str] = "delete_experiment"
    exp_id: int


@dataclass(frozen=True)
class KillTrial(Said):
    NAME: ClassVar[str] = "kill_trial"
    trial_id: int


@dataclass(frozen=True)
class CreateModel(Said):
    """A model of the registry, with no versions yet."""

    NAME: ClassVar[str] = "create_model"
    name: str
    description: str = ""
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class RegisterVersion(Request[int]):
    """A completed checkpoint registered as the model's next version; answered with it."""

    NAME: ClassVar[str] = "register_version"
    model: str
    uuid: str

    def reply(self, result: object) -> int:
        if not isinstance(result, int) or isinstance(result, bool):
            raise HpcdetError(f"the daemon answered {self.NAME!r} with {result!r}, not a "
                              "version; restart it (`hpcdet daemon stop`)")
        return result

    def wire(self, reply: int) -> object:
        return reply


@dataclass(frozen=True)
class JobUpdate:
    """`hpcdet job update`: one field of one job (an experiment), e.g. priority 10."""

    experiment_id: int
    field: str  # priority, weight, resource_pool, ahead_of, behind_of
    value: object


@dataclass(frozen=True)
class UpdateJobs(Said):
    """Each update: {"job": experiment id, "field": ..., "value": ...}, checked all before any
    is applied (``of`` makes them from ``JobUpdate``s)."""

    NAME: ClassVar[str] = "update_jobs"
    updates: list[dict[str, Any]]

    @classmethod
    def of(cls, updates: list[JobUpdate]) -> UpdateJobs:
        return cls([{"job": u.experiment_id, "field": u.field, "value": u.value}
                    for u in updates])


@dataclass(frozen=True)
class CreateWebhook(Said):
    """`hpcdet webhook create`: ``triggers`` as written (experiment-state:COMPLETED,ERROR,
    custom); ``type`` default or slack; ``mode`` workspace or specific (hpcdet.notify)."""

    NAME: ClassVar[str] = "create_webhook"
    url: str
    triggers: list[str]
    type: str = "default"
    name: str = ""
    mode: str = "workspace"


@dataclass(frozen=True)
class DeleteWebhook(Said):
    """By id or name."""

    NAME: ClassVar[str] = "delete_webhook"
    webhook: str


# --------------------------------------------------------------------------------------- wire


def encode(request: Request[Any]) -> tuple[str, dict[str, Any]]:
    """The request's name and the fields that differ from their defaults: a request that asks
    nothing newer than a running daemon knows is one that daemon takes (``decode`` refuses an
    argument it does not know)."""
    return request.NAME, {f.name: getattr(request, f.name) for f in fields(request)  # type: ignore[arg-type]
                          if f.default is MISSING or getattr(request, f.name) != f.default}


def decode(op: object, args: object) -> Request[Any]:
    """The request a wire body names, or an HpcdetError that says what is wrong with it."""
    cls = REQUESTS.get(op) if isinstance(op, str) else None
    if cls is None:
        raise HpcdetError(f"unknown request {op!r}")
    if not isinstance(args, dict):
        raise HpcdetError(f"request {op!r}: its arguments are {args!r}, not an object")
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(args) - names)
    if unknown:
        raise HpcdetError(f"request {op!r} has no argument {', '.join(unknown)}; this CLI and "
                          "the daemon are of different hpcdet versions: restart the daemon")
    try:
        request: Request[Any] = cls(**args)
    except TypeError as e:
        raise HpcdetError(f"request {op!r}: {e}") from None
    return request


class Handlers:
    """The daemon's dispatch table: request type -> what carries it out."""

    def __init__(self) -> None:
        self._table: dict[type[Request[Any]], Callable[[Any], Any]] = {}

    def on(self, kind: type[Q], handler: Callable[[Q], Any]) -> Handlers:
        self._table[kind] = handler
        return self

    @property
    def kinds(self) -> set[type[Request[Any]]]:
        return set(self._table)

    def __call__(self, request: Request[Any]) -> object:
        """Carry out the request; its reply as JSON."""
        handler = self._table.get(type(request))
        if handler is None:
            raise HpcdetError(f"this daemon cannot serve request {request.NAME!r} yet")
        return request.wire(handler(request))


__all__ = [
    "ID_FIELDS", "REQUESTS", "Activate", "Cancel", "Continue", "ContinueTrial", "CopyDatabase",
    "Create", "CreateModel", "CreateWebhook", "Created", "Creates", "DeleteCheckpoint",
    "DeleteExperiment", "DeleteWebhook",
    "Handlers", "JobUpdate", "Kill", "KillTrial", "Pause", "Ping", "Pong", "RegisterVersion",
    "Request", "Said", "SetExperiment", "Shutdown", "UpdateJobs", "decode", "encode",
]
