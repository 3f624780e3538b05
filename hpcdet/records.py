"""What the store gives out: frozen records of its rows, their JSON columns decoded, their
states as the ``hpcdet.states`` enums and an experiment's config as a typed ``ExperimentConfig``.

The store's SQLModel rows never leave ``hpcdet.store``; its two readers (``Store`` in the daemon
and ``Reads``, the CLI's sqlite3 path) build these records (``hpcdet.store.decode``). This module
imports no SQL and no config module, so the CLI's start-up stays cheap: an experiment's config is
parsed when first asked for, once per process and stored text (``ExperimentRecord.config``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from hpcdet.states import CheckpointState, ExperimentState, RunState, TrialState

if TYPE_CHECKING:
    from hpcdet.config import ExperimentConfig


class ConfigSource(Protocol):
    """An experiment's stored config, read by the store when asked for."""

    def parsed(self) -> ExperimentConfig:
        """Validated (cached per stored text)."""
        ...

    def stored(self) -> dict[str, Any]:
        """As stored, a fresh copy, unvalidated (no config module imported)."""
        ...


@dataclass(frozen=True)
class ExperimentRecord:
    id: int
    name: str
    state: ExperimentState
    description: str
    labels: tuple[str, ...]
    archived: bool
    resource_pool: str
    priority: int | None
    weight: float
    position: float
    backend: str
    searcher: str
    created: float
    ended: float | None
    journal_offset: int
    progress: float
    actions_done: int
    searcher_done: bool
    error: str
    task: str  # "" for an experiment; command, notebook or shell (hpcdet.config.task)
    advice: str  # the daemon's advice once its first runs ended (hpcdet.short_jobs)
    config_source: ConfigSource = field(repr=False, compare=False)

    @property
    def config(self) -> ExperimentConfig:
        """The experiment's config, validated (raises ``StoreError`` when a listing left it
        unread)."""
        return self.config_source.parsed()

    @property
    def stored_config(self) -> dict[str, Any]:
        """The config as stored, unvalidated: what `describe` shows, without the cost of the
        config modules on the CLI's path."""
        return self.config_source.stored()


@dataclass(frozen=True)
class TrialRecord:
    id: int
    experiment_id: int
    request_id: int
    ops: tuple[int, ...]  # the operation lengths issued by the searcher, in order
    ops_completed: int
    closed: bool
    stop_requested: bool
    early_exit: str
    exit_reported: bool
    state: TrialState
    hparams: dict[str, Any]
    trial_seed: int
    restarts: int
    run_id: int
    latest_checkpoint: str | None
    steps_completed: int
    progress: float
    status: str
    metadata: dict[str, Any]
    alerts: list[dict[str, Any]]
    best_validation: float | None
    end_reason: str
    started: float | None
    ended: float | None


@dataclass(frozen=True)
class RunRecord:
    id: int | None
    trial_id: int
    run_id: int
    job_id: str
    state: RunState
    reason: str
    submitted: float
    ended: float | None
    exit_code: int | None
    preempt_acked: bool
    outcome: str
    event_offset: int
    event_seq: int
    searcher_seq: int
    first_op: int
    ops_decided: int
    started: float | None
    used_seconds: float | None
    used_gpus: int | None
    used_cpus: int | None
    usage_by: str


@dataclass(frozen=True)
class ArrayRecord:
    id: int | None
    experiment_id: int
    index: int
    job_id: str
    offset: int
    count: int
    throttle: int
    submitted: float


@dataclass(frozen=True)
class CheckpointRecord:
    uuid: str
    trial_id: int
    experiment_id: int
    run_id: int
    steps_completed: int
    metadata: dict[str, Any]
    resources: dict[str, int]
    state: CheckpointState
    reported: float


@dataclass(frozen=True)
class ModelVersionRecord:
    """A checkpoint registered as a model's ``version``-th; its files are
    ``<storage>/<uuid>``."""

    model: str
    version: int
    uuid: str
    experiment_id: int
    trial_id: int
    steps_completed: int
    storage: str
    registered: float


@dataclass(frozen=True)
class ModelRecord:
    name: str
    description: str
    metadata: dict[str, Any]
    created: float
    versions: tuple[ModelVersionRecord, ...]  # version 1 first


class LiveRun(NamedTuple):
    """A live run as the daemon's loop reads every one on every tick, with what its trial
    says it should do: plain values from one query, not an ORM object per row."""

    trial_id: int
    run_id: int
    job_id: str
    state: RunState
    event_offset: int
    event_seq: int
    searcher_seq: int
    first_op: int
    ops_decided: int
    experiment_id: int
    stop_requested: bool
    ops: tuple[int, ...]


# The fields that are a stored JSON column decoded; the column is the name with "_json".
_DECODED = frozenset({"labels", "ops", "hparams", "metadata", "alerts", "resources"})

Record = ExperimentRecord | TrialRecord | RunRecord | ArrayRecord | CheckpointRecord


def stored_form(record: Record) -> dict[str, Any]:
    """The record's columns as the database holds them, in its order (the JSON ones encoded
    as stored), an experiment's without its config: what ``describe --json`` shows."""
    return {f"{f.name}_json" if f.name in _DECODED else f.name:
            json.dumps(list(value) if isinstance(value, tuple) else value)
            if f.name in _DECODED else value
            for f in fields(record) if f.name != "config_source"
            for value in [getattr(record, f.name)]}
