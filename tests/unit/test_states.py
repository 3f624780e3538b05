"""States are types whose values are the strings hpcdet has always stored, journaled and
printed: a state reads, writes and prints exactly as its name."""

from __future__ import annotations

import json

import pytest

from hpcdet.states import (
    FINAL_EXPERIMENT_STATES,
    FINAL_TRIAL_STATES,
    LIVE_RUN_STATES,
    CheckpointState,
    ExperimentState,
    JobState,
    QueueState,
    RunState,
    TrialState,
)

ALL = [*ExperimentState, *TrialState, *JobState, *RunState, *CheckpointState, *QueueState]


@pytest.mark.parametrize("state", ALL, ids=lambda s: f"{type(s).__name__}.{s.name}")
def test_a_state_is_its_name_wherever_it_goes(state: ExperimentState) -> None:
    name = state.name
    assert state.value == name
    assert (str(state), f"{state}", f"{state:>3}", format(state)) == (name, name, name, name)
    assert json.dumps({"state": state}) == json.dumps({"state": name})
    assert state == name and hash(state) == hash(name)
    assert type(state)(name) is state  # a stored string reads back as its member


def test_stored_strings_are_found_in_the_rule_sets() -> None:
    assert {"COMPLETED", "CANCELED", "ERROR"} == FINAL_TRIAL_STATES == FINAL_EXPERIMENT_STATES
    assert "RUNNING" in LIVE_RUN_STATES and "COMPLETED" not in LIVE_RUN_STATES


def test_a_run_is_submitting_then_in_its_jobs_state() -> None:
    assert [s.value for s in RunState] == ["SUBMITTING", *(j.value for j in JobState)]
