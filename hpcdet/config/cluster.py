"""Cluster config: site-wide defaults an admin may drop in, and the user's own file over them.

Files, in order (later wins):

1. defaults built into hpcdet;
2. the site file, ``$HPCDET_SITE_CONFIG`` or ``/etc/hpcdet/cluster.yaml``;
3. the user file, ``$HPCDET_CLUSTER_CONFIG`` or ``~/.config/hpcdet/cluster.yaml``
   (``$XDG_CONFIG_HOME/hpcdet/cluster.yaml`` when that is set).

Missing default files are skipped; a file named explicitly (argument or variable) must exist.
``partitions`` is merged pool by pool. The admin's load caps are the exception to "user wins":
a user may raise ``min_poll_interval`` or lower ``submissions_per_minute`` and ``max_jobs``, but
a value past the site's is replaced by the site's (``describe()`` shows it as capped), so an
admin can rely on hpcdet never polling or submitting faster than the site allows. Nobody can
poll the scheduler more often than every 5 seconds.
"""

from __future__ import annotations

import grp
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hpcdet import backends
from hpcdet.config.cluster_files import DEFAULT_SITE_PATH, SITE_ENV, USER_ENV
from hpcdet.config.cluster_files import default_user_path as _default_user_path
from hpcdet.config.cluster_files import home as _home
from hpcdet.config.hpc import Directive
from hpcdet.config.schema import (
    At,
    Custom,
    Int,
    Number,
    Problems,
    Spec,
    Str,
    Walltime,
    check_mapping,
    format_walltime,
    is_number,
    parse_walltime,
    show,
)
from hpcdet.config.source import parse_yaml, read_config_file
from hpcdet.containers import DEFAULT_RUNTIME, RUNTIMES
from hpcdet.errors import ConfigError

BACKENDS = ("auto", *backends.NAMES)
MIN_POLL_FLOOR = 5.0


_PARTITION = Directive("names")


def _partitions(value: Any, at: At) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        at.error(f"must map resource pools to partitions (Slurm) or queues (PBS), e.g."
                 f" {{gpu: gpu-a100, cpu: normal}}; got {show(value)}")
        return None
    checked = {pool: _PARTITION.check(partition, at / pool) for pool, partition in value.items()}
    return {pool: partition for pool, partition in checked.items() if partition is not None}


def _poll_interval(value: Any, at: At) -> float | None:
    if value is None:
        return None
    if not is_number(value) or value < MIN_POLL_FLOOR:
        at.error(
            f"must be a number of seconds >= {MIN_POLL_FLOOR:g} (hpcdet never polls the"
            f" scheduler more often), got {show(value)}"
        )
        return None
    return float(value)


def _share_with_group(value: Any, at: At) -> bool | str | None:
    if value is None or isinstance(value, bool):
        return value
    if not isinstance(value, str) or not value:
        at.error(f"must be false (private, the default), true (your primary group) or a group "
                 f"name; got {show(value)}")
        return None
    try:
        grp.getgrnam(value)
    except KeyError:
        at.error(f"no group named {value!r} on this machine; see `id` for your groups")
        return None
    return value


FILE_SPECS: dict[str, Spec] = {
    "backend": Str(None, choices=BACKENDS),
    "partitions": Custom(_partitions),
    "default_pool": Directive("names"),
    "account": Directive("name"),
    "qos": Directive("name"),
    "walltime": Walltime(None),
    "gpu_type": Directive("name"),
    "template_dir": Str(None),
    "container_runtime": Str(None, choices=RUNTIMES),
    "image_dir": Str(None),
    "image_cache": Str(None),
    "slot_type": Str(None, choices=("cuda", "rocm")),
    "python": Str(None),
    "min_poll_interval": Custom(_poll_interval),
    "submissions_per_minute": Int(None, minimum=1),
    "max_jobs": Int(None, minimum=1),
    "min_job_minutes": Int(None, minimum=1),
    "share_with_group": Custom(_share_with_group),
    "daemon_lease": Int(None, minimum=10),
    "ask_above_slot_hours": Number(None, minimum=0),
}
_PATH_KEYS = ("template_dir", "image_dir", "image_cache", "python")


@dataclass(frozen=True)
class ClusterConfig:
    """Where and how trials are submitted. ``partitions`` maps resource pools to partitions
    (Slurm) or queues (PBS); ``sources`` says where each key's value came from."""

    backend: str = "auto"
    partitions: dict[str, str] = field(default_factory=dict)
    default_pool: str | None = None
    account: str | None = None
    qos: str | None = None
    walltime_seconds: int | None = None
    gpu_type: str | None = None
    template_dir: str | None = None
    # Trials with environment.image run in this runtime; image_dir holds images the site
    # converted (used as they are, read-only); image_cache is where hpcdet converts the others
    # (default <state>/images). slot_type: what a partition's GPUs are.
    container_runtime: str = DEFAULT_RUNTIME
    image_dir: str | None = None
    image_cache: str | None = None
    slot_type: str = "cuda"
    # The interpreter of trials without an image, when the experiment names none.
    python: str | None = None
    min_poll_interval: float = MIN_POLL_FLOOR
    submissions_per_minute: int = 30
    max_jobs: int | None = None
    # The site's shortest job it wants (LRZ bans many under 2 minutes, GWDG asks for an hour):
    # a search without resources.packing is told to pack.
    min_job_minutes: int | None = None
    # State, run trees and checkpoints are 0700/0600; with a group, 0750/0640 (and that group).
    share_with_group: bool | str = False
    # Seconds without a heartbeat after which another host's daemon takes over (lease.py).
    daemon_lease: int = 120
    # `experiment create` asks before a search estimated above this many slot-hours (GPU-hours).
    ask_above_slot_hours: float | None = None
    site_path: str | None = None
    user_path: str | None = None
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def partition_for(self, pool: str) -> str | None:
        """The partition (queue) of a resource pool; an unmapped pool name is used as is."""
        pool = pool or self.default_pool or ""
        return self.partitions.get(pool, pool) or None

    def describe(self) -> list[tuple[str, str, str]]:
        """``(key, value, source)`` rows for ``hpcdet cluster show``; source: default/site/user."""
        rows = []
        for key in FILE_SPECS:
            rows.append((key, self._shown(key), self.sources.get(key, "default")))
        return rows

    def _shown(self, key: str) -> str:
        if key == "walltime":
            seconds = self.walltime_seconds
            return "(not set)" if seconds is None else format_walltime(seconds)
        value = getattr(self, key)
        if key == "partitions":
            return ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or "(none)"
        return "(not set)" if value is None else str(value)


@dataclass
class _Layer:
    name: str
    path: Path
    values: dict[str, Any]


def load_cluster_config(
    site_path: str | Path | None = None,
    user_path: str | Path | None = None,
    env: Mapping[str, str] = os.environ,
) -> ClusterConfig:
    """Read the site and user cluster files (see the module docstring for precedence and caps).

    Raises:
        ConfigError: listing every problem of both files, each with its key and line.
    """
    site_explicit = site_path or env.get(SITE_ENV)
    user_explicit = user_path or env.get(USER_ENV)
    site = Path(site_explicit) if site_explicit else DEFAULT_SITE_PATH
    user = Path(user_explicit) if user_explicit else _default_user_path(env)
    failures: list[tuple[Path, list[str]]] = []
    layers = []
    for name, path, given, variable in (
        ("site", site, site_path, SITE_ENV),
        ("user", user, user_path, USER_ENV),
    ):
        must_exist = None
        if given:
            must_exist = "check the path"
        elif env.get(variable):
            must_exist = f"create it or unset {variable}"
        values, problems = _read_layer(path, must_exist, env)
        if problems:
            failures.append((path, problems))
        elif values is not None:
            layers.append(_Layer(name, path, values))
    if failures:
        raise _combined_error(failures)
    return _merge(layers)


def _read_layer(
    path: Path, must_exist: str | None, env: Mapping[str, str]
) -> tuple[dict[str, Any] | None, list[str]]:
    """The keys the file sets; ``must_exist`` is the hint if a file named explicitly is missing."""
    try:
        text = read_config_file(path)  # bounded: a FIFO or a huge file must not hang the CLI
    except FileNotFoundError:
        return None, [f"<file>: no such file; {must_exist}"] if must_exist else []
    except (OSError, ValueError) as err:
        return None, [f"<file>: cannot be read ({err})"]
    parsed = parse_yaml(text)
    if not parsed.readable:
        return None, parsed.problems
    problems = Problems(origins=parsed.origins, items=parsed.problems)
    document = parsed.data
    if document is not None and not isinstance(document, dict):
        problems.add((), f"must be a mapping of keys ({', '.join(FILE_SPECS)}), got"
                         f" {show(document)}")
        return None, problems.items
    checked = check_mapping(document, At(problems), FILE_SPECS)
    values = {k: v for k, v in checked.items() if v is not None}
    for key in _PATH_KEYS:
        if key in values:
            values[key] = _resolve(values[key], path.parent, env)
    return values, problems.items


def _resolve(value: str, base: Path, env: Mapping[str, str]) -> str:
    if value == "~" or value.startswith("~/"):
        value = str(_home(env)) + value[1:]
    return str(base / value) if not os.path.isabs(value) else value


def _combined_error(failures: list[tuple[Path, list[str]]]) -> ConfigError:
    if len(failures) == 1:
        path, problems = failures[0]
        return ConfigError(problems, source=f"cluster config {path}")
    problems = [f"{path}: {problem}" for path, items in failures for problem in items]
    return ConfigError(problems, source="cluster config")


# Each cap: the comparison by which a user's value would go past the site's.
_CAPS: dict[str, Callable[[Any, Any], bool]] = {
    "min_poll_interval": lambda user, site: user < site,
    "submissions_per_minute": lambda user, site: user > site,
    "max_jobs": lambda user, site: user > site,
    "min_job_minutes": lambda user, site: user < site,
}


def _merge(layers: list[_Layer]) -> ClusterConfig:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    site_values: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.values.items():
            if key == "partitions" and "partitions" in values:
                value = {**values["partitions"], **value}
                sources[key] = f"{sources[key]}+{layer.name}"
                values[key] = value
                continue
            elif key in _CAPS and key in site_values and _CAPS[key](value, site_values[key]):
                sources[key] = f"site (capped; user asked {value})"
                continue
            values[key] = value
            sources[key] = layer.name
        if layer.name == "site":
            site_values = dict(layer.values)
    walltime = values.pop("walltime", None)
    paths = {layer.name: str(layer.path) for layer in layers}
    return ClusterConfig(
        **values,
        site_path=paths.get("site"),
        user_path=paths.get("user"),
        walltime_seconds=None if walltime is None else parse_walltime(walltime),
        sources=sources,
    )
