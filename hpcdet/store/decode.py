"""Rows to records (``hpcdet.records``): the one place a stored JSON column is decoded and a
stored config parsed.

A row is given as a mapping of column name to value: an ORM row's ``vars()`` or an
``sqlite3.Row``. SQLite stores booleans as 0 and 1; records carry bool.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from hpcdet.errors import StoreError
from hpcdet.records import (
    ArrayRecord,
    CheckpointRecord,
    ExperimentRecord,
    LiveRun,
    RunRecord,
    TrialRecord,
)
from hpcdet.states import CheckpointState, ExperimentState, RunState, TrialState

if TYPE_CHECKING:
    from hpcdet.config import ExperimentConfig


class Row(Protocol):
    def __getitem__(self, name: str) -> Any: ...


# Unread: a listing that left config_json out reads it as this.
UNREAD_CONFIG = "{}"


class _Configs:
    """Each experiment's config parsed once per process and stored text: the daemon asks for
    it several times a tick, and a queue update or a continue changes the text."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[str, ExperimentConfig]] = {}
        self._lock = threading.Lock()  # the web UI reads on several threads

    def get(self, exp_id: int, text: str) -> ExperimentConfig:
        known = self._by_id.get(exp_id)
        if known is not None and known[0] == text:
            return known[1]
        if text == UNREAD_CONFIG:
            raise StoreError(f"experiment {exp_id}'s config was not read")
        cfg = parse_config(text)
        with self._lock:
            if len(self._by_id) >= self.LIMIT:
                self._by_id.clear()
            self._by_id[exp_id] = (text, cfg)
        return cfg


def parse_config(text: str) -> ExperimentConfig:
    """A stored config, validated (uncached)."""
    from hpcdet.config import ExperimentConfig

    return ExperimentConfig.from_dict(json.loads(text))


CONFIGS = _Configs()


class StoredConfig:
    """``hpcdet.records.ConfigSource`` of a stored config's text."""

    __slots__ = ("cached", "exp_id", "text")

    def __init__(self, exp_id: int, text: str, cached: bool = True) -> None:
        self.exp_id, self.text, self.cached = exp_id, text, cached

    def parsed(self) -> ExperimentConfig:
        if not self.cached:
            return parse_config(self.text)
        return CONFIGS.get(self.exp_id, self.text)

    def stored(self) -> dict[str, Any]:
        if self.text == UNREAD_CONFIG:
            raise StoreError(f"experiment {self.exp_id}'s config was not read")
        value: dict[str, Any] = json.loads(self.text)
        return value


R = TypeVar("R")

_EXPERIMENT_STATES = {s.value: s for s in ExperimentState}
_TRIAL_STATES = {s.value: s for s in TrialState}
_RUN_STATES = {s.value: s for s in RunState}


def _record(cls: type[R], **fields: Any) -> R:
    """A frozen record from every one of its fields, without the generated ``__init__``, which
    sets each through ``object.__setattr__``: a listing builds thousands (a test checks that
    every field is given)."""
    record = object.__new__(cls)
    record.__dict__.update(fields)
    return record


def _tuple(text: str) -> tuple[Any, ...]:
    return () if text == "[]" else tuple(json.loads(text))


def _object(text: str) -> Any:
    return {} if text == "{}" else json.loads(text)


def _list(text: str) -> Any:
    return [] if text == "[]" else json.loads(text)


def experiment(row: Row) -> ExperimentRecord:
    state = row["state"]
    return _record(
        ExperimentRecord, id=row["id"], name=row["name"],
        state=_EXPERIMENT_STATES.get(state) or ExperimentState(state),
        description=row["description"], labels=_tuple(row["labels_json"]),
        archived=bool(row["archived"]), resource_pool=row["resource_pool"],
        priority=row["priority"], weight=row["weight"], position=row["position"],
        backend=row["backend"], searcher=row["searcher"], created=row["created"],
        ended=row["ended"], journal_offset=row["journal_offset"], progress=row["progress"],
        actions_done=row["actions_done"], searcher_done=bool(row["searcher_done"]),
        error=row["error"], task=row["task"], advice=row["advice"],
        config_source=StoredConfig(row["id"], row["config_json"]))


def trial(row: Row) -> TrialRecord:
    state = row["state"]
    return _record(
        TrialRecord, id=row["id"], experiment_id=row["experiment_id"],
        request_id=row["request_id"], ops=_tuple(row["ops_json"]),
        ops_completed=row["ops_completed"], closed=bool(row["closed"]),
        stop_requested=bool(row["stop_requested"]), early_exit=row["early_exit"],
        exit_reported=bool(row["exit_reported"]),
        state=_TRIAL_STATES.get(state) or TrialState(state),
        hparams=_object(row["hparams_json"]), trial_seed=row["trial_seed"],
        restarts=row["restarts"], run_id=row["run_id"],
        latest_checkpoint=row["latest_checkpoint"], steps_completed=row["steps_completed"],
        progress=row["progress"], status=row["status"],
        metadata=_object(row["metadata_json"]), alerts=_list(row["alerts_json"]),
        best_validation=row["best_validation"], end_reason=row["end_reason"],
        started=row["started"], ended=row["ended"])


def run(row: Row) -> RunRecord:
    state = row["state"]
    return _record(
        RunRecord, id=row["id"], trial_id=row["trial_id"], run_id=row["run_id"],
        job_id=row["job_id"], state=_RUN_STATES.get(state) or RunState(state),
        reason=row["reason"], submitted=row["submitted"], ended=row["ended"],
        exit_code=row["exit_code"], preempt_acked=bool(row["preempt_acked"]),
        outcome=row["outcome"], event_offset=row["event_offset"], event_seq=row["event_seq"],
        searcher_seq=row["searcher_seq"], first_op=row["first_op"],
        ops_decided=row["ops_decided"], started=row["started"],
        used_seconds=row["used_seconds"], used_gpus=row["used_gpus"],
        used_cpus=row["used_cpus"], usage_by=row["usage_by"])


def array(row: Row) -> ArrayRecord:
    return _record(
        ArrayRecord, id=row["id"], experiment_id=row["experiment_id"], index=row["index"],
        job_id=row["job_id"], offset=row["offset"], count=row["count"],
        throttle=row["throttle"], submitted=row["submitted"])


def checkpoint(row: Row) -> CheckpointRecord:
    return _record(
        CheckpointRecord, uuid=row["uuid"], trial_id=row["trial_id"],
        experiment_id=row["experiment_id"], run_id=row["run_id"],
        steps_completed=row["steps_completed"], metadata=_object(row["metadata_json"]),
        resources=_object(row["resources_json"]), state=CheckpointState(row["state"]),
        reported=row["reported"])


def live_run(row: tuple[Any, ...]) -> LiveRun:
    """From the columns of ``Store.live_runs``' query, in LiveRun's order."""
    return LiveRun(row[0], row[1], row[2], _RUN_STATES.get(row[3]) or RunState(row[3]), row[4],
                   row[5], row[6], row[7], row[8], row[9], bool(row[10]), _tuple(row[11]))


def searcher_event(text: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(text)
    return value
