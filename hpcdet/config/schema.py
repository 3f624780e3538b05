"""Building blocks for validating YAML configs with messages a user can act on.

Validation never stops at the first mistake: every checker records problems in a shared
``Problems`` and returns a usable value (the default when the input was wrong), so one pass finds
everything. Each problem starts with the YAML path of the offending value and, when known, where
it came from (``line 12`` or the ``--config`` override that set it).
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Union

PathPart = Union[str, int]
KeyPath = tuple[PathPart, ...]


def format_path(path: KeyPath) -> str:
    """``("bind_mounts", 1, "host_path")`` -> ``bind_mounts[1].host_path``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "<top level>"


def show(value: Any) -> str:
    """A value as a user wrote it, with its YAML type, for 'got ...' in messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int):
        digits = len(str(abs(value))) if abs(value) < 10**4000 else None
        if digits is None or digits > 30:
            return f"an integer of {digits or 'over 4000'} digits"
        return f"{value} (an integer)"
    if isinstance(value, float):
        return f"{value} (a number)"
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return f"{text!r} (a string)"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def did_you_mean(word: str, choices: Collection[str]) -> str:
    """A 'did you mean' hint, or the list of valid choices when nothing is close."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    return "valid keys: " + ", ".join(sorted(choices))


@dataclass
class Problems:
    """Every problem found so far, and where each path came from (``line 12``, ``--config ...``)."""

    origins: dict[KeyPath, str] = field(default_factory=dict)
    items: list[str] = field(default_factory=list)
    paths: set[KeyPath] = field(default_factory=set)  # those with a problem

    def origin(self, path: KeyPath) -> str | None:
        # A missing key has no line of its own; its parent's line still points the user there.
        for end in range(len(path), -1, -1):
            found = self.origins.get(path[:end])
            if found is not None:
                return found
        return None

    def add(self, path: KeyPath, message: str) -> None:
        where = self.origin(path)
        prefix = format_path(path) + (f" ({where})" if where else "")
        self.items.append(f"{prefix}: {message}")
        self.paths.add(path)

    def __bool__(self) -> bool:
        return bool(self.items)


@dataclass(frozen=True)
class At:
    """A position in the document being validated: problems recorded here carry its path."""

    problems: Problems
    path: KeyPath = ()

    def __truediv__(self, part: PathPart) -> At:
        return At(self.problems, (*self.path, part))

    def error(self, message: str) -> None:
        self.problems.add(self.path, message)


class Spec:
    """How to check one field. ``None`` in the input means "use the default", as in Determined."""

    def __init__(self, default: Any = None) -> None:
        self.default = default

    def check(self, value: Any, at: At) -> Any:
        if value is None:
            return copy.deepcopy(self.default)
        return self.validate(value, at)

    def validate(self, value: Any, at: At) -> Any:
        return value


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# Every integer hpcdet keeps ends up in SQLite (a signed 64-bit integer) or in arithmetic done
# in floats, so one outside int64 is refused where it is read, not where it would overflow.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# The largest magnitude a number may have: float arithmetic on it (differences, powers of a
# divisor, sums of weights) must stay finite.
FLOAT_MAX = 1e300


FINITE_HINT = f"must be a finite number of magnitude at most {FLOAT_MAX:g}"


def is_int64(value: Any) -> bool:
    return is_int(value) and INT64_MIN <= value <= INT64_MAX


INT64_HINT = f"integers must be between {INT64_MIN} and {INT64_MAX}"


def is_finite_number(value: Any) -> bool:
    """An int or float that float arithmetic can use: not NaN, not infinite, not huge."""
    if not is_number(value):
        return False
    try:
        return math.isfinite(float(value)) and abs(float(value)) <= FLOAT_MAX
    except OverflowError:
        return False


def _num(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _bounds(minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f" between {_num(minimum)} and {_num(maximum)}"
    if minimum is not None:
        return f" >= {_num(minimum)}"
    if maximum is not None:
        return f" <= {_num(maximum)}"
    return ""


class Int(Spec):
    def __init__(
        self, default: int | None = None, minimum: int | None = None, maximum: int | None = None
    ) -> None:
        super().__init__(default)
        self.minimum, self.maximum = minimum, maximum

    def validate(self, value: Any, at: At) -> Any:
        low, high = self.minimum, self.maximum
        in_range = (low is None or value >= low) if is_int(value) else False
        in_range = in_range and (high is None or value <= high)
        if not in_range:
            at.error(f"must be an integer{_bounds(low, high)}, got {show(value)}")
            return self.default
        if not is_int64(value):
            at.error(f"is too large: {INT64_HINT}, got {show(value)}")
            return self.default
        return value


class Number(Spec):
    def __init__(
        self,
        default: float | None = None,
        minimum: float | None = None,
        above: float | None = None,
        maximum: float | None = None,
    ) -> None:
        super().__init__(default)
        self.minimum, self.above, self.maximum = minimum, above, maximum

    def validate(self, value: Any, at: At) -> Any:
        ok = is_number(value)
        ok = ok and (self.minimum is None or value >= self.minimum)
        ok = ok and (self.above is None or value > self.above)
        ok = ok and (self.maximum is None or value <= self.maximum)
        if not ok:
            bound = _bounds(self.minimum, self.maximum)
            if self.above is not None:
                bound = f" > {_num(self.above)}" + (
                    f" and <= {_num(self.maximum)}" if self.maximum is not None else ""
                )
            at.error(f"must be a number{bound}, got {show(value)}")
            return self.default
        if not is_finite_number(value):
            at.error(f"{FINITE_HINT}, got {show(value)}")
            return self.default
        return value


class Str(Spec):
    def __init__(self, default: str | None = None, choices: Collection[str] = ()) -> None:
        super().__init__(default)
        self.choices = tuple(choices)

    def validate(self, value: Any, at: At) -> Any:
        if self.choices and value not in self.choices:
            at.error(f"must be one of {', '.join(self.choices)}; got {show(value)}")
            return self.default
        if not isinstance(value, str):
            at.error(f"must be a string, got {show(value)}; quote the value if needed")
            return self.default
        return value


class Bool(Spec):
    def validate(self, value: Any, at: At) -> Any:
        if not isinstance(value, bool):
            at.error(f"must be true or false, got {show(value)}")
            return self.default
        return value


class StrList(Spec):
    def validate(self, value: Any, at: At) -> Any:
        if not isinstance(value, list):
            at.error(f"must be a list of strings, got {show(value)}")
            return copy.deepcopy(self.default)
        out: list[str] = []
        for i, item in enumerate(value):
            if isinstance(item, str):
                out.append(item)
            else:
                (at / i).error(f"must be a string, got {show(item)}; quote the value if needed")
        return out


def check_storable(value: Any, at: At) -> None:
    """Report every NaN, infinity and integer outside int64 in a value stored as it is: configs
    are stored as JSON, which has no NaN or infinity, and are read back by programs that take
    integers as 64-bit (Python cannot even print one of over 4300 digits)."""
    if isinstance(value, float) and not math.isfinite(value):
        at.error(
            f"{value} is not a number a config can hold (it is stored as JSON); use a finite"
            f" number, or quote it ('{value}') for a string"
        )
    elif is_int(value) and not is_int64(value):
        at.error(f"is too large: {INT64_HINT}, got {show(value)}; quote it for a string")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_storable(item, at / key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_storable(item, at / i)


class Opaque(Spec):
    """A section hpcdet stores and hands to trial code without interpreting it."""

    def __init__(self, default: Any = None, kind: type = dict) -> None:
        super().__init__(default)
        self.kind = kind

    def validate(self, value: Any, at: At) -> Any:
        if not isinstance(value, self.kind):
            want = "a mapping" if self.kind is dict else "a list"
            at.error(f"must be {want}, got {show(value)}")
            return copy.deepcopy(self.default)
        check_storable(value, at)
        return copy.deepcopy(value)


class Custom(Spec):
    """A field with its own checker; the checker also sees ``None`` (for required fields)."""

    def __init__(self, checker: Callable[[Any, At], Any]) -> None:
        super().__init__(None)
        self.checker = checker

    def check(self, value: Any, at: At) -> Any:
        return self.checker(value, at)


def check_mapping(
    value: Any,
    at: At,
    specs: Mapping[str, Spec],
    *,
    required: Mapping[str, str] | None = None,
    removed: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Check a mapping against ``specs``; returns it with every default filled in.

    ``required`` maps a key to the hint given when it is missing; ``removed`` maps keys that
    Determined used to accept (or that hpcdet refuses) to the message that explains what to do.
    """
    if value is None:
        value = {}
    if not isinstance(value, dict):
        at.error(f"must be a mapping of keys ({', '.join(specs)}), got {show(value)}")
        value = {}
    for key in value:
        if key in specs:
            continue
        if removed and key in removed:
            (at / str(key)).error(removed[key])
        else:
            (at / str(key)).error(f"unknown key; {did_you_mean(str(key), specs)}")
    out = {key: spec.check(value.get(key), at / key) for key, spec in specs.items()}
    for key, hint in (required or {}).items():
        if value.get(key) is None:
            (at / key).error(hint)
    return out


_DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_SUFFIXED = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?:in)?)?(?:(\d+)s)?$", re.IGNORECASE)
_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
MAX_WALLTIME_SECONDS = 365 * 86400
WALLTIME_HINT = (
    "use 'HH:MM:SS', 'D-HH:MM:SS', '90m', '2h', '1d12h' or a whole number of minutes"
)


def parse_walltime(value: Any) -> int:
    """Seconds from a Slurm-style time limit (bare numbers are minutes, as ``sbatch -t`` reads).

    Raises ``ValueError`` with a message fit for the user.
    """
    if is_int(value):
        seconds = int(value) * 60
    elif isinstance(value, str) and len(value) <= 64:
        seconds = _parse_walltime_text(value.strip())
    else:
        raise ValueError(f"must be a walltime, got {show(value)}; {WALLTIME_HINT}")
    if seconds <= 0:
        raise ValueError(f"must be a positive walltime, got {show(value)}")
    if seconds > MAX_WALLTIME_SECONDS:
        raise ValueError(
            f"must be a walltime of at most {MAX_WALLTIME_SECONDS // 86400} days, got"
            f" {show(value)}; ask for what the partition allows (sinfo -o '%P %l')"
        )
    return seconds


def _parse_walltime_text(text: str) -> int:
    suffixed = _SUFFIXED.match(text)
    if text and suffixed and any(suffixed.groups()):
        amounts = [int(g) if g else 0 for g in suffixed.groups()]
        return sum(n * unit for n, unit in zip(amounts, _DURATION_UNITS.values()))
    slurm = _SLURM_TIME.match(text)
    if not slurm:
        raise ValueError(f"is not a walltime: {text!r}; {WALLTIME_HINT}")
    days_text, first, second, third = slurm.groups()
    parts = [int(p) for p in (first, second, third) if p is not None]
    if any(p >= 60 for p in parts[1:]):
        raise ValueError(f"is not a walltime: {text!r}; minutes and seconds must be below 60")
    if days_text is not None:
        # Slurm reads days-hours[:minutes[:seconds]].
        units = [3600, 60, 1]
        return int(days_text) * 86400 + sum(p * u for p, u in zip(parts, units))
    units = {1: [60], 2: [60, 1], 3: [3600, 60, 1]}[len(parts)]
    return sum(p * u for p, u in zip(parts, units))


def format_walltime(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    clock = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{clock}" if days else clock


class Walltime(Spec):
    """Stored as the user wrote it (so the raw config round-trips); parsed where it is used."""

    def validate(self, value: Any, at: At) -> Any:
        try:
            parse_walltime(value)
        except ValueError as err:
            at.error(str(err))
            return None
        return value
