"""The journal's entries: one frozen class per kind of decision the daemon journals.

On disk an entry is one JSON line, ``{"kind": ..., "exp_id": ..., "time": ..., **fields}``
(and ``part`` for entries appended together, see ``Store.apply_journal``). ``encode`` writes
the fields of an entry; ``decode`` reads a line back into its class, by the kind string, once.
A field that defaults to ``None`` is left out of the line when it is ``None``: journals written
before these classes existed leave out exactly those fields, and their appliers tell "absent"
from "given" by it. Lines keep other keys they carry (``cascade`` of an old entry, say) unread.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Entry:
    kind: ClassVar[str]


@dataclass(frozen=True)
class ExperimentCreated(Entry):
    kind: ClassVar[str] = "experiment_created"
    name: str
    config: dict[str, Any]
    backend: str
    searcher: str
    description: str | None = None
    labels: list[str] = field(default_factory=list)
    resource_pool: str = ""
    priority: int | None = None
    weight: float = 1.0
    request_id: str | None = None  # the create request that made it, to answer it again
    task: str = ""  # "" for an experiment; command, notebook or shell (hpcdet.config.task)


@dataclass(frozen=True)
class ExperimentStateChanged(Entry):
    """``cascade``: its idle trials follow (``states.idle_trials_follow``)."""

    kind: ClassVar[str] = "experiment_state"
    state: str
    cascade: bool = False
    reason: str | None = None
    error: str | None = None  # the experiment's error from now on


@dataclass(frozen=True)
class ExperimentFailed(Entry):
    kind: ClassVar[str] = "experiment_failed"
    message: str


@dataclass(frozen=True)
class ExperimentQueueUpdated(Entry):
    """`hpcdet job update`: the fields given change."""

    kind: ClassVar[str] = "experiment_queue"
    priority: int | None = None
    weight: float | None = None
    resource_pool: str | None = None
    position: float | None = None


@dataclass(frozen=True)
class ExperimentErrorSet(Entry):
    kind: ClassVar[str] = "experiment_error"
    message: str


@dataclass(frozen=True)
class ExperimentAdvised(Entry):
    """Advice on how the search runs that the daemon found once its first runs ended (to pack
    short trials: hpcdet.short_jobs)."""

    kind: ClassVar[str] = "experiment_advice"
    advice: str


@dataclass(frozen=True)
class ExperimentConfigChanged(Entry):
    kind: ClassVar[str] = "experiment_config"
    config: dict[str, Any]


@dataclass(frozen=True)
class ExperimentMetaChanged(Entry):
    """What describes an experiment, not how it runs; the fields given change."""

    kind: ClassVar[str] = "experiment_meta"
    name: str | None = None
    description: str | None = None
    labels: list[str] | None = None
    archived: bool | None = None


@dataclass(frozen=True)
class TrialCreated(Entry):
    kind: ClassVar[str] = "trial_created"
    trial_id: int
    hparams: dict[str, Any]
    trial_seed: int
    request_id: int = 0
    action_index: int | None = None  # the searcher decision it carries out


@dataclass(frozen=True)
class TrialContinued(Entry):
    kind: ClassVar[str] = "trial_continued"
    trial_id: int


@dataclass(frozen=True)
class TrialStateChanged(Entry):
    kind: ClassVar[str] = "trial_state"
    trial_id: int
    state: str
    restarts: int | None = None  # None: unchanged
    reason: str = ""


@dataclass(frozen=True)
class OpIssued(Entry):
    kind: ClassVar[str] = "op_issued"
    request_id: int
    length: int
    op_index: int
    action_index: int | None = None


@dataclass(frozen=True)
class TrialClosed(Entry):
    kind: ClassVar[str] = "trial_closed"
    request_id: int
    action_index: int | None = None


@dataclass(frozen=True)
class TrialStopped(Entry):
    kind: ClassVar[str] = "trial_stop"
    request_id: int
    action_index: int | None = None


@dataclass(frozen=True)
class SearcherShutdown(Entry):
    kind: ClassVar[str] = "searcher_shutdown"
    failure: bool = False
    message: str = ""
    action_index: int | None = None


@dataclass(frozen=True)
class SearcherEventFed(Entry):
    """An event fed to the searcher, with the trial event behind it (``trial_id``, ``run_id``,
    ``seq``) or the trial whose exit it reports."""

    kind: ClassVar[str] = "searcher_event"
    event: dict[str, Any]
    progress: float | None = None
    trial_id: int | None = None
    run_id: int | None = None
    seq: int | None = None
    exited_trial_id: int | None = None


@dataclass(frozen=True)
class RunSubmitting(Entry):
    kind: ClassVar[str] = "run_submitting"
    trial_id: int
    run_id: int
    first_op: int = 0


@dataclass(frozen=True)
class RunSubmitted(Entry):
    kind: ClassVar[str] = "run_submitted"
    trial_id: int
    run_id: int
    job_id: str


@dataclass(frozen=True)
class RunEnded(Entry):
    """A run's end and what its trial does next (older journals carry the trial's part in a
    ``trial_state`` entry that follows: ``trial_state`` None)."""

    kind: ClassVar[str] = "run_ended"
    trial_id: int
    run_id: int
    job_state: str
    exit_code: int | None = None
    outcome: str = ""
    trial_state: str | None = None
    restarts: int | None = None
    reason: str = ""
    # What it used (hpcdet.views.usage): when its first node started, and the scheduler's
    # account where it keeps one (``usage_by`` names it).
    started: float | None = None
    used_seconds: float | None = None
    used_gpus: int | None = None
    used_cpus: int | None = None
    usage_by: str = ""


@dataclass(frozen=True)
class CheckpointDeleted(Entry):
    kind: ClassVar[str] = "checkpoint_deleted"
    uuid: str
    trial_id: int


@dataclass(frozen=True)
class ModelCreated(Entry):
    """A model of the registry; journaled in the registry's journal (``exp_id`` 0)."""

    kind: ClassVar[str] = "model_created"
    name: str
    description: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelVersionRegistered(Entry):
    """A checkpoint registered as the ``version``-th of a model. What finds its files is
    copied in, so that the version outlives its experiment's rows."""

    kind: ClassVar[str] = "model_version"
    model: str
    version: int
    uuid: str
    experiment_id: int
    trial_id: int
    steps_completed: int
    storage: str  # the checkpoint storage's directory; the files are <storage>/<uuid>


@dataclass(frozen=True)
class ArraySubmitting(Entry):
    kind: ClassVar[str] = "array_submitting"
    index: int
    offset: int
    count: int
    throttle: int


@dataclass(frozen=True)
class ArraySubmitted(Entry):
    kind: ClassVar[str] = "array_submitted"
    job_id: str
    offset: int
    count: int
    throttle: int
    index: int | None = None  # None in journals written before array_submitting existed


@dataclass(frozen=True)
class ArrayAbandoned(Entry):
    kind: ClassVar[str] = "array_abandoned"
    index: int


ENTRY_CLASSES: tuple[type[Entry], ...] = (
    ExperimentCreated, ExperimentStateChanged, ExperimentFailed, ExperimentQueueUpdated,
    ExperimentErrorSet, ExperimentAdvised, ExperimentConfigChanged, ExperimentMetaChanged,
    TrialCreated,
    TrialContinued, TrialStateChanged, OpIssued, TrialClosed, TrialStopped, SearcherShutdown,
    SearcherEventFed, RunSubmitting, RunSubmitted, RunEnded, CheckpointDeleted, ArraySubmitting,
    ArraySubmitted, ArrayAbandoned, ModelCreated, ModelVersionRegistered,
)
# Every kind string a journal may hold, with the class it reads as.
KINDS: dict[str, type[Entry]] = {
    **{cls.kind: cls for cls in ENTRY_CLASSES},
    "experiment_priority": ExperimentQueueUpdated,  # written by hpcdet before the queue updates
}

_NUMBERS = (int, float)
_CHECKS: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": _NUMBERS, "str": (str,), "bool": (bool,),
    "dict[str, Any]": (dict,), "list[str]": (list,),
}


def encode(entry: Entry) -> dict[str, Any]:
    """The entry's kind and fields as its journal line holds them."""
    body: dict[str, Any] = {"kind": entry.kind}
    for f in dataclasses.fields(entry):
        value = getattr(entry, f.name)
        if value is None and f.default is None:
            continue
        body[f.name] = value
    return body


def decode(cls: type[Entry], line: dict[str, Any]) -> Entry:
    """The entry of ``cls`` a journal line holds; raises KeyError for a field it lacks and
    TypeError for one of the wrong type (a damaged line)."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in line:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise KeyError(f.name)
            continue
        value = line[f.name]
        declared = str(f.type)
        optional = declared.endswith(" | None")
        allowed = _CHECKS.get(declared.removesuffix(" | None"))
        if value is None and optional:
            values[f.name] = None
            continue
        if allowed is not None and (not isinstance(value, allowed) or (
                isinstance(value, bool) and bool not in allowed)):
            raise TypeError(f"{cls.kind}.{f.name} is {value!r}")
        values[f.name] = value
    return cls(**values)
