"""Reading config YAML with the line of every key, and applying ``--config key=value`` overrides."""

from __future__ import annotations

import datetime
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from hpcdet.config.schema import KeyPath, Problems, format_path, show

_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"


# A config is a few kilobytes and a few hundred values; these leave room for a large ``data``
# section while keeping parsing short: PyYAML's pure-Python composer takes about 0.2 ms per
# value on a busy login node (its C parser, much faster, overflows the C stack on deep nesting).
MAX_CONFIG_BYTES = 1 << 20
MAX_NODES = 20_000


class TooLarge(yaml.MarkedYAMLError):
    """The document expands to more than ``MAX_NODES`` values."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 numbers and a budget of expanded nodes.

    YAML 1.1 reads ``1:30:00`` as the base-60 integer 5400 (a walltime would silently become
    5400 minutes) and ``1e-5`` as a string; Determined's own CLI parses YAML 1.2, where neither
    happens.

    An alias stands for a copy of everything under its anchor, and everything after loading
    (plain copies, JSON, validation) sees that copy: nine lines of nested aliases ("billion
    laughs") stand for 10**9 values. Composition counts each node with everything an alias
    expands to (merge keys ``<<`` are aliases too) and stops past ``MAX_NODES``, before anything
    is expanded.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._expanded = 0
        self._sizes: dict[int, int] = {}  # id(node) -> its expanded size, for aliases to it
        self._aliases = False

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        alias = self.check_event(yaml.AliasEvent)
        mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
        before = self._expanded
        node = super().compose_node(parent, index)
        assert node is not None  # called only where an event is pending
        if alias:
            self._aliases = True
            self._expanded += self._sizes.get(id(node), 1)  # unknown: an alias to its own parent
        else:
            self._expanded += 1
            self._sizes[id(node)] = self._expanded - before
        if self._expanded > MAX_NODES:
            raise TooLarge(
                None, None,
                f"the YAML expands to more than {MAX_NODES} values"
                + (" through aliases (*name)" if self._aliases else ""),
                mark,
            )
        return node


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT_TAG, _FLOAT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _INT_TAG,
    re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
    list("-+0123456789"),
)
_Loader.add_implicit_resolver(
    _FLOAT_TAG,
    re.compile(
        r"^(?:[-+]?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


MAX_DEPTH = 64


class Parsed(NamedTuple):
    """A YAML document, ``path -> "line N"`` for every key and list item, and its problems.

    ``readable`` is False when the text is not YAML at all (the one problem names the line);
    otherwise the problems (duplicate keys, unstorable values) sit beside a usable document.
    """

    data: Any
    origins: dict[KeyPath, str]
    problems: list[str]
    readable: bool = True


def parse_yaml(text: str) -> Parsed:
    """Parse config text; never raises for bad input."""
    origins: dict[KeyPath, str] = {}
    problems: list[str] = []
    try:
        data = _load(text, origins, problems)
    except TooLarge as err:
        return Parsed(None, {}, [_too_large_problem(err)], readable=False)
    except yaml.MarkedYAMLError as err:
        return Parsed(None, {}, [_syntax_problem(err)], readable=False)
    except yaml.YAMLError as err:
        return Parsed(None, {}, [f"<top level>: invalid YAML: {err}"], readable=False)
    except RecursionError:
        return Parsed(None, {}, ["<top level>: the YAML nests too deeply"], readable=False)
    except (ValueError, TypeError) as err:
        problem = f"<top level>: the YAML holds a value that cannot be read: {err}"
        return Parsed(None, {}, [problem], readable=False)
    cleaned = to_plain(data, (), problems, set())
    return Parsed(cleaned, origins, problems)


def _load(text: str, origins: dict[KeyPath, str], problems: list[str]) -> Any:
    loader = _Loader(text)  # reads the text at once: a control character raises here
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        # Walk before constructing: construction flattens merge keys (<<) into the nodes.
        _walk(node, (), origins, problems, set())
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _too_large_problem(err: TooLarge) -> str:
    mark = err.problem_mark
    where = f" (line {mark.line + 1})" if mark else ""
    fix = "write the values out without aliases, or put" if "alias" in str(err.problem) else "put"
    return (
        f"<top level>{where}: {err.problem}, far more than a config holds; {fix} large data in"
        " a file in the context directory and read it from the trial"
    )


def read_config_file(path: Path) -> str:
    """A config file's text, refused (``ValueError`` with the reason) when it is larger than
    ``MAX_CONFIG_BYTES`` or not a regular file (a FIFO or device would never end)."""
    mode = path.stat().st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(str(path))
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path}: is not a regular file; pass the path of a YAML config")
    with path.open("rb") as file:
        data = file.read(MAX_CONFIG_BYTES + 1)
        size = max(os.fstat(file.fileno()).st_size, len(data))
    if len(data) > MAX_CONFIG_BYTES:
        mib, rest = divmod(MAX_CONFIG_BYTES, 2**20)
        limit = f"{MAX_CONFIG_BYTES} bytes" if rest else f"{mib} MiB"
        raise ValueError(
            f"{path}: is {size / 2**20:.1f} MiB ({size} bytes), more than the {limit} a config"
            " may be; put large data in a file in the context directory and read it from the"
            " trial"
        )
    return data.decode("utf-8")


def _syntax_problem(err: yaml.MarkedYAMLError) -> str:
    mark = err.problem_mark or err.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
    what = "; ".join(p for p in (err.context, err.problem) if p)
    return f"<top level> ({where}): invalid YAML: {what or err}; check the indentation and quoting"


def _walk(
    node: yaml.Node, path: KeyPath, origins: dict[KeyPath, str], problems: list[str], seen: set[int]
) -> None:
    """Record the line of every key and list item, and report duplicate keys."""
    if id(node) in seen or len(path) > MAX_DEPTH:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            child = (*path, str(key_node.value))
            line = f"line {key_node.start_mark.line + 1}"
            if child in origins:
                problems.append(
                    f"{format_path(child)} ({line}): duplicate key, also set on"
                    f" {origins[child]}; YAML would keep only the last one, so remove one"
                )
            origins[child] = line
            _walk(value_node, child, origins, problems, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = (*path, i)
            origins[child] = f"line {item.start_mark.line + 1}"
            _walk(item, child, origins, problems, seen)


def to_plain(value: Any, path: KeyPath, problems: list[str], active: set[int]) -> Any:
    """The value as JSON-compatible data (the daemon stores configs as JSON).

    Dates become ISO strings; non-string keys, binary values and self-referencing aliases are
    problems.
    """
    if isinstance(value, (dict, list)):
        if id(value) in active or len(path) > MAX_DEPTH:
            problems.append(f"{format_path(path)}: refers to itself through a YAML alias")
            return None
        active.add(id(value))
        try:
            if isinstance(value, list):
                return [to_plain(v, (*path, i), problems, active) for i, v in enumerate(value)]
            return _plain_mapping(value, path, problems, active)
        finally:
            active.discard(id(value))
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    problems.append(f"{format_path(path)}: {show(value)} cannot be stored; use a plain value")
    return None


def _plain_mapping(
    value: dict[Any, Any], path: KeyPath, problems: list[str], active: set[int]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            problems.append(
                f"{format_path((*path, str(key)))}: keys must be strings, got {show(key)};"
                " quote the key"
            )
            continue
        out[key] = to_plain(item, (*path, key), problems, active)
    return out


def _clip(text: str) -> str:
    """An override as messages quote it: long values are cut (one may be a whole document)."""
    return text if len(text) <= 80 else text[:77] + "..."


def apply_overrides(
    data: dict[str, Any], overrides: Sequence[str], origins: dict[KeyPath, str], problems: Problems
) -> None:
    """Set each ``key.sub=value`` (value parsed as YAML) in ``data``, noting where it came from."""
    for full in overrides:
        override = _clip(full)
        key, sep, text = full.partition("=")
        parts = [p.strip() for p in key.split(".")]
        if not sep or not all(parts):
            problems.items.append(
                f"--config {override!r}: expected KEY=VALUE with a dotted key,"
                " e.g. --config resources.slots_per_trial=2"
            )
            continue
        path: KeyPath = tuple(int(p) if p.isdigit() else p for p in parts)
        try:
            value = yaml.load(text, Loader=_Loader) if text.strip() else None
        except TooLarge as err:
            problems.items.append(f"--config {override!r}: {_too_large_problem(err)}")
            continue
        except (yaml.YAMLError, ValueError, TypeError, RecursionError):
            problems.items.append(
                f"{format_path(path)} (--config {override!r}): the value is not valid YAML;"
                f" if it is a string, quote it: --config '{_clip(key)}=\"{_clip(text)}\"'"
            )
            continue
        plain_problems: list[str] = []
        value = to_plain(value, path, plain_problems, set())
        if plain_problems or not _set_path(data, path, value, override, problems):
            problems.items.extend(plain_problems)
            continue
        for known in [p for p in origins if p[: len(path)] == path]:
            del origins[known]
        for end in range(1, len(path) + 1):
            origins.setdefault(path[:end], f"--config {override}")
        origins[path] = f"--config {override}"


def _set_path(
    data: dict[str, Any], path: KeyPath, value: Any, override: str, problems: Problems
) -> bool:
    target: Any = data
    for depth, part in enumerate(path[:-1]):
        target = _step_into(target, part)
        if target is None:
            problems.items.append(
                f"--config {override!r}: {format_path(path[: depth + 1])} is not a mapping,"
                f" so {format_path(path)} cannot be set"
            )
            return False
    last = path[-1]
    if isinstance(target, list) and isinstance(last, int) and last < len(target):
        target[last] = value
        return True
    if isinstance(target, dict):
        target[str(last)] = value
        return True
    problems.items.append(
        f"--config {override!r}: {format_path(path[:-1])} is not a mapping,"
        f" so {format_path(path)} cannot be set"
    )
    return False


def _step_into(target: Any, part: str | int) -> Any:
    """The child container at ``part``, created as a mapping if absent; ``None`` if impossible."""
    if isinstance(target, list):
        return target[part] if isinstance(part, int) and part < len(target) else None
    if not isinstance(target, dict):
        return None
    key = str(part)
    if target.get(key) is None:
        target[key] = {}
    child = target[key]
    return child if isinstance(child, (dict, list)) else None
