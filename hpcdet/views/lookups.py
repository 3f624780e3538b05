"""Single records by id, for the faces: the CLI, the SDK and the web UI read through the
views, never the store itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcdet.records import CheckpointRecord, ExperimentRecord, TrialRecord

if TYPE_CHECKING:
    from hpcdet.store.queries import Queries


def experiment(store: Queries, exp_id: int) -> ExperimentRecord:
    return store.experiment(exp_id)


def trial(store: Queries, trial_id: int) -> TrialRecord:
    return store.trial(trial_id)


def trials(store: Queries, exp_id: int) -> list[TrialRecord]:
    """The experiment's trials, by id."""
    return store.trials(exp_id)


def checkpoint(store: Queries, uuid: str) -> CheckpointRecord:
    """One checkpoint, in whatever state."""
    return store.checkpoint(uuid)
