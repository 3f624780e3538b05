"""What may reach a line of a batch script's header (``#SBATCH``, ``#PBS``).

Quoting protects a shell word, not a comment line: a newline in a directive's value starts a
new shell line, which the batch shell runs, and it also ends the scheduler's reading of every
later directive. So these values are checked twice: when a config is loaded (the problem names
the YAML path) and when a backend renders a script (a value that got past the first check never
renders). Standard library only; both ``hpcdet.config`` and ``hpcdet.schedulers`` use it.
"""

from __future__ import annotations

import re
from typing import Any

from hpcdet.text import escaped, is_control

_NAME = r"[A-Za-z0-9_.+-]+"
_NAME_HINT = "letters, digits and _ . + - only, e.g. 'gpu-a100'"
# kind -> (the whole value must match, the characters it may contain, what to write instead)
KINDS: dict[str, tuple[re.Pattern[str], re.Pattern[str] | None, str]] = {
    "name": (re.compile(_NAME), re.compile(r"[A-Za-z0-9_.+-]"), f"use a Slurm name: {_NAME_HINT}"),
    "names": (
        re.compile(rf"{_NAME}(,{_NAME})*"), re.compile(r"[A-Za-z0-9_.+,-]"),
        f"use a Slurm name or a comma-separated list of names: {_NAME_HINT}",
    ),
    "variable": (
        re.compile(r"[A-Za-z_][A-Za-z0-9_]*"), re.compile(r"[A-Za-z0-9_]"),
        "use a shell variable name: letters, digits and _, not starting with a digit,"
        " e.g. 'OMP_NUM_THREADS'",
    ),
    "sbatch_option": (
        re.compile(r"--[A-Za-z][A-Za-z0-9-]*(=\S+)?"), None,
        "write one long option per entry, '--name' or '--name=value' with no spaces, e.g."
        " '--mem=16G' or '--cpus-per-task=4' (see `man sbatch` for the long form of an option)",
    ),
    "text": (re.compile(r".*", re.DOTALL), None, ""),
}
_NAMED = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", "\x1b": "an escape",
          "\x00": "a NUL", "\x07": "a bell"}


def _describe(ch: str) -> str:
    name = _NAMED.get(ch, "a control character")
    return f"{name} ({escaped(ch)}, U+{ord(ch):04X})"


def problem(value: Any, kind: str) -> str | None:
    """Why ``value`` must not reach a batch script as a ``kind`` (see ``KINDS``), or None.

    The reason reads after the value: ``f"{value!r} {reason}"``.
    """
    whole, allowed, hint = KINDS[kind]
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    for i, ch in enumerate(value):
        if is_control(ch):
            fix = f"remove it; {hint}" if hint else "remove it"
            return (f"contains {_describe(ch)} at character {i + 1}, which would end the batch"
                    f" script's line; {fix}")
    if whole.fullmatch(value):
        return None
    if not value:
        return f"must not be empty; {hint}"
    if allowed is not None:
        bad = next((ch for ch in value if not allowed.fullmatch(ch)), None)
        if bad is not None:
            return f"contains {bad!r}, which is not allowed here; {hint}"
    return f"is not in the form needed here; {hint}"
