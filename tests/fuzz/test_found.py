"""Examples the fuzz suite (``test_config_fuzz.py``) found, each kept as a plain test."""

from __future__ import annotations

import pytest

from hpcdet.config import load_experiment_config
from hpcdet.errors import ConfigError


def problems_of(text: str, *overrides: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_experiment_config(text, overrides)
    return info.value.problems


def test_a_control_character_in_the_yaml_is_a_config_error() -> None:
    assert problems_of("entrypoint: x\n\x1f") == [
        "<top level>: invalid YAML: unacceptable character #x001f: special characters are not"
        ' allowed\n  in "<unicode string>", position 14'
    ]
