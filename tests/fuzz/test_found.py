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


HEAD = "entrypoint: x\nsearcher: {name: single, metric: m}\n"
HUGE = "0x" + "f" * 5000


@pytest.mark.parametrize(("text", "override", "start"), [
    (HEAD, f"data={HUGE}", "data (--config data=0xfff"),
    (HEAD + f"data: {{a: {HUGE}}}\n", None, "data.a (line 3): is too large: integers must be"),
    (HEAD + f"hyperparameters: {{a: {HUGE}}}\n", None, "hyperparameters.a (line 3): is too large"),
    (HEAD + f"environment: {{ports: {{a: {HUGE}}}}}\n", None,
     "environment.ports.a (line 3): must be a port number between 1 and 65535, got an integer"
     " of over 4000 digits"),
    (HEAD + f"resources: {{shm_size: {HUGE}}}\n", None, "resources.shm_size (line 3): must be a"
     " memory size"),
])
def test_an_integer_too_long_to_print_is_a_config_error(
    text: str, override: str | None, start: str
) -> None:
    [problem] = problems_of(text, *([override] if override else []))
    assert problem.startswith(start), problem
    assert len(problem) < 400
