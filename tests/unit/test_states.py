"""States are types whose values are the strings hpcdet has always stored, journaled and
printed: a state reads, writes and prints exactly as its name."""

from __future__ import annotations

import ast
import json
from pathlib import Path

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



# Where a state's name may be written as a string: the states module, the store's column
# defaults, and the batch system the local backend plays (its job records use Slurm's words).
# A backend's ``_STATE_MAP`` is keyed by its scheduler's words, which it parses into JobState.
_MAY_SPELL_STATES = {"hpcdet/states.py", "hpcdet/store/models.py",
                     "hpcdet/schedulers/local_exec.py"}
_NAMES = {s.value for s in ALL}


def _spelled_states(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    native: set[int] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id == "_STATE_MAP" for t in node.targets)):
            native.update(id(k) for k in node.value.keys)
    return [f"{path}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in _NAMES and id(node) not in native]


def test_no_state_is_spelled_out_beside_its_type() -> None:
    root = Path(__file__).resolve().parents[2]
    found = [hit for d in ("hpcdet", "cli", "launchers") for p in sorted((root / d).rglob("*.py"))
             if p.relative_to(root).as_posix() not in _MAY_SPELL_STATES
             for hit in _spelled_states(p)]
    assert found == []


def test_what_the_searchers_decisions_do_to_trial_states() -> None:
    from hpcdet import states

    # 0.37: an operation promotes a WAITING trial, a close completes it; others stay.
    assert states.promoted(TrialState.WAITING) == TrialState.QUEUED
    assert states.closed(TrialState.WAITING) == TrialState.COMPLETED
    for other in (TrialState.QUEUED, TrialState.ACTIVE, TrialState.PAUSED, TrialState.COMPLETED):
        assert states.promoted(other) is None and states.closed(other) is None
    # 0.38: a stop completes a trial without a job; one with a job ends when its job does.
    assert {t for t in TrialState if states.stopped_by_searcher(t)} == {
        TrialState.QUEUED, TrialState.PAUSED, TrialState.WAITING}


def test_a_named_job_and_a_failed_experiment_move_runs_and_trials() -> None:
    from hpcdet import states

    assert states.job_named(RunState.SUBMITTING) == RunState.PENDING
    assert states.job_named(RunState.RUNNING) is None  # an entry applied again changes nothing
    assert {r for r in RunState if states.canceled_by_failure(r)} == LIVE_RUN_STATES
    assert {t for t in TrialState if states.trial_canceled_by_failure(t) is None} == (
        FINAL_TRIAL_STATES)
    assert states.ends("COMPLETED") and states.ends(ExperimentState.ERROR)
    assert not states.ends(ExperimentState.ACTIVE) and not states.ends(TrialState.WAITING)
