"""A run's control file as a record (hpcdet.rundir.control)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hpcdet.rundir.control import (
    DEFAULT_REASON,
    Control,
    ControlFileError,
    read_control,
    write_control,
)

# control.json as hpcdet's daemon wrote it before the record (main at 5616652, controls.py's
# dict through write_atomic): with the searcher's operations, and without.
MAIN_WITH_OPS = ('{\n "preempt": true,\n "reason": "the experiment was paused",\n '
                 '"best_validation": 0.25,\n "ops": [\n  10,\n  40\n ],\n "decided": 1\n}')
MAIN_WITHOUT_OPS = '{\n "preempt": false,\n "reason": "",\n "best_validation": null\n}'


@pytest.mark.parametrize("text, control", [
    (MAIN_WITH_OPS, Control(True, "the experiment was paused", 0.25, (10, 40), 1)),
    (MAIN_WITHOUT_OPS, Control()),
])
def test_a_control_file_of_an_older_daemon_reads_and_is_written_the_same(
        tmp_path: Path, text: str, control: Control) -> None:
    path = tmp_path / "control.json"
    path.write_text(text)
    assert read_control(path) == control
    write_control(path, control)
    assert path.read_text() == text


@pytest.mark.parametrize("obj, control", [
    ({}, Control()),
    ({"preempt": True}, Control(preempt=True)),
    ({"preempt": True, "reason": None}, Control(preempt=True)),
    ({"ops": [], "decided": 0}, Control(ops=())),
    ({"best_validation": 1, "future": {"x": 1}}, Control(best_validation=1.0)),
])
def test_missing_fields_take_their_defaults_and_unknown_ones_are_ignored(
        obj: dict[str, Any], control: Control) -> None:
    assert Control.from_json(obj) == control


def test_no_file_yet_is_a_run_told_to_carry_on(tmp_path: Path) -> None:
    control = read_control(tmp_path / "control.json")
    assert control == Control() and control.stop_reason is None and control.ops is None


def test_a_stop_says_why(tmp_path: Path) -> None:
    assert Control(preempt=True, reason="the experiment was canceled").stop_reason == (
        "the experiment was canceled")
    assert Control(preempt=True).stop_reason == DEFAULT_REASON
    assert Control(reason="left over").stop_reason is None


@pytest.mark.parametrize("obj, message", [
    ({"ops": ["10"]}, "control.json: 'ops' must be a list of integers, not ['10']"),
    ({"ops": 10}, "'ops' must be a list of integers, not 10"),
    ({"ops": [1], "decided": True}, "'decided' must be an integer, not True"),
    ({"preempt": "yes"}, "'preempt' must be true or false, not 'yes'"),
    ({"reason": 3}, "'reason' must be a string, not 3"),
    ({"best_validation": "0.5"}, "'best_validation' must be a number or null, not '0.5'"),
])
def test_a_field_of_the_wrong_type_is_named(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ControlFileError) as err:
        Control.from_json(obj)
    assert message in str(err.value)


def test_a_file_that_is_not_a_control_object_is_unreadable_not_a_protocol_error(
        tmp_path: Path) -> None:
    path = tmp_path / "control.json"
    for text in ('{"preempt": tr', "[1, 2]"):
        path.write_text(text)
        with pytest.raises(ValueError) as err:
            read_control(path)
        assert not isinstance(err.value, ControlFileError)
