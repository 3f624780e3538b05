"""The clusters a laptop knows: a private YAML file under the user's config directory.

    default: big
    clusters:
      big: {ssh: login.big.example, hpcdet: hpcdet}

Which cluster a command runs on: ``-c/--cluster NAME``, else ``HPCDET_CLUSTER``, else the
default; none of them means this machine, as without profiles.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hpcdet.errors import UsageError
from hpcdet.private import open_private, private_dir

ENV_CLUSTER = "HPCDET_CLUSTER"
DEFAULT_COMMAND = "hpcdet"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_KEYS = ("ssh", "hpcdet")


class ProfileError(UsageError):
    """The clusters file cannot be read, or a name or host in it is wrong."""


@dataclass(frozen=True)
class Cluster:
    name: str
    ssh: str  # a host, user@host, or a ~/.ssh/config alias
    hpcdet: str = DEFAULT_COMMAND  # the hpcdet command on the login node


@dataclass(frozen=True)
class Profiles:
    clusters: dict[str, Cluster] = field(default_factory=dict)
    default: str | None = None

    def get(self, name: str) -> Cluster:
        try:
            return self.clusters[name]
        except KeyError:
            known = ", ".join(sorted(self.clusters)) or "none yet"
            raise ProfileError(
                f"no cluster named {name!r} (known: {known}); add it with "
                f"`hpcdet cluster add {name} --ssh HOST`") from None


def config_file() -> Path:
    """``$XDG_CONFIG_HOME/hpcdet/clusters.yaml``, else ``~/.config/hpcdet/clusters.yaml``."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser().absolute() / "hpcdet" / "clusters.yaml"


def check_name(name: str) -> str:
    if not _NAME.match(name) or name == "local":
        raise ProfileError(
            f"cluster name {name!r}: use letters, digits, '.', '_' or '-' (at most 64, "
            "starting with a letter or digit; `local` means this machine)")
    return name


def check_host(host: str, where: str = "--ssh") -> str:
    # What ssh would read as an option, or a line break, is no host.
    if not host or host.startswith("-") or any(c.isspace() for c in host):
        raise ProfileError(f"{where}: {host!r} is not an SSH host; give a host name, "
                           "user@host, or an alias of ~/.ssh/config")
    return host


def load(path: Path | None = None) -> Profiles:
    """The profiles, none when the file is missing; a file that is not ours alone, not YAML or
    not of this shape is an error naming its line."""
    from hpcdet.config.source import parse_yaml

    path = path or config_file()
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Profiles()
    except OSError as e:
        raise ProfileError(f"cannot read {path}: {e.strerror}") from e
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise ProfileError(
            f"{path} can be changed by someone else (owner uid {st.st_uid}, mode "
            f"{stat.S_IMODE(st.st_mode):04o}), and it decides which hosts hpcdet runs your "
            f"commands on; make it yours alone (chmod 600 {path}) or remove it")
    parsed = parse_yaml(path.read_text(encoding="utf-8"))
    if not parsed.readable or parsed.problems:
        raise ProfileError(f"{path}: " + "; ".join(parsed.problems))
    return _decode(path, parsed.data, parsed.origins)


def _decode(path: Path, data: Any, origins: dict[Any, str]) -> Profiles:
    def bad(key: tuple[Any, ...], what: str) -> ProfileError:
        where = origins.get(key) or origins.get(key[:-1]) or "line 1"
        return ProfileError(f"{path} ({where}): {what}; fix or remove that line "
                            f"(`hpcdet cluster add/remove` write this file)")

    if data is None:
        return Profiles()
    if not isinstance(data, dict):
        raise bad((), "expected `clusters:` and `default:` at the top level")
    for key in data:
        if key not in ("clusters", "default"):
            raise bad((key,), f"unknown key {key!r} (expected clusters, default)")
    clusters: dict[str, Cluster] = {}
    entries = data.get("clusters") or {}
    if not isinstance(entries, dict):
        raise bad(("clusters",), "clusters: expected a mapping of names to {ssh, hpcdet}")
    for name, entry in entries.items():
        here = ("clusters", name)
        if not _NAME.match(str(name)):
            raise bad(here, f"cluster name {name!r} is not a valid name")
        if not isinstance(entry, dict):
            raise bad(here, f"cluster {name}: expected ssh: and hpcdet:")
        for key in entry:
            if key not in _KEYS:
                raise bad((*here, key), f"cluster {name}: unknown key {key!r} (expected ssh, "
                                        "hpcdet)")
        host, command = entry.get("ssh"), entry.get("hpcdet", DEFAULT_COMMAND)
        if not isinstance(host, str):
            raise bad((*here, "ssh"), f"cluster {name}: ssh must be a host name")
        if not isinstance(command, str) or not command.strip():
            raise bad((*here, "hpcdet"), f"cluster {name}: hpcdet must be a command")
        try:
            check_host(host, f"cluster {name}: ssh")
        except ProfileError as e:
            raise bad((*here, "ssh"), str(e)) from None
        clusters[name] = Cluster(name, host, command)
    default = data.get("default")
    if default is not None and (not isinstance(default, str) or default not in clusters):
        raise bad(("default",), f"default: {default!r} is not one of the clusters")
    return Profiles(clusters, default)


def save(profiles: Profiles, path: Path | None = None) -> None:
    """Write the file whole (0600, in a 0700 directory), replacing it atomically."""
    import yaml

    path = path or config_file()
    private_dir(path.parent, share_with_group=None)
    data: dict[str, Any] = {"clusters": {
        c.name: {"ssh": c.ssh, **({"hpcdet": c.hpcdet} if c.hpcdet != DEFAULT_COMMAND else {})}
        for c in profiles.clusters.values()}}
    if profiles.default is not None:
        data = {"default": profiles.default, **data}
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        yaml.safe_dump(data, out, sort_keys=False, default_flow_style=False)
    os.replace(tmp, path)


def add(name: str, host: str, command: str | None, make_default: bool,
        path: Path | None = None) -> Profiles:
    profiles = load(path)
    clusters = dict(profiles.clusters)
    old = clusters.get(check_name(name))
    clusters[name] = Cluster(name, check_host(host),
                             command or (old.hpcdet if old else DEFAULT_COMMAND))
    default = name if make_default or profiles.default is None else profiles.default
    result = Profiles(clusters, default)
    save(result, path)
    return result


def use(name: str, path: Path | None = None) -> Profiles:
    profiles = load(path)
    profiles.get(name)
    result = replace(profiles, default=name)
    save(result, path)
    return result


def remove(name: str, path: Path | None = None) -> Profiles:
    profiles = load(path)
    profiles.get(name)
    clusters = {k: v for k, v in profiles.clusters.items() if k != name}
    default = profiles.default if profiles.default != name else None
    result = Profiles(clusters, default)
    save(result, path)
    return result


def chosen(option: str | None, path: Path | None = None) -> Cluster | None:
    """The cluster a command runs on: the option, else ``HPCDET_CLUSTER``, else the default;
    None for this machine. ``HPCDET_CLUSTER=`` (empty) or ``-c local`` ask for this machine."""
    name = option if option is not None else os.environ.get(ENV_CLUSTER)
    if name is not None:
        if name in ("", "local"):
            return None
        return load(path).get(name)
    if option is None and not config_file_exists(path):
        return None
    profiles = load(path)
    return profiles.clusters[profiles.default] if profiles.default else None


def config_file_exists(path: Path | None = None) -> bool:
    return (path or config_file()).exists()
