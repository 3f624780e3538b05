"""Strict host keys: a host's key must be the one in ``~/.ssh/known_hosts``; an unknown or
changed key is refused with its fingerprint and what to run. ``trust`` records a key the user
has checked, appending one line and never rewriting the file."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from pathlib import Path

import paramiko

from hpcdet.errors import HostKeyError


def known_hosts_path() -> Path:
    return Path.home() / ".ssh" / "known_hosts"


def host_entry(hostname: str, port: int) -> str:
    """The name known_hosts files key a host by (ssh's form: ``[host]:port`` off port 22)."""
    return hostname if port == 22 else f"[{hostname}]:{port}"


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _load(paths: Sequence[Path]) -> paramiko.HostKeys:
    keys = paramiko.HostKeys()
    for path in paths:
        if path.is_file():
            try:
                keys.load(str(path))
            except (OSError, paramiko.SSHException) as e:
                raise HostKeyError(f"{path}: cannot be read ({e}); fix or move it") from None
    return keys


def check(hostname: str, port: int, key: paramiko.PKey, known: Sequence[Path] | None,
          accept: list[str] | None = None) -> None:
    """Raise HostKeyError unless ``key`` is the one recorded for the host. With ``accept`` (a
    list), an unknown key is appended to the user's known_hosts instead and a line saying so
    added to ``accept``; a changed key is refused either way."""
    paths = list(known) if known is not None else [known_hosts_path()]
    entry = host_entry(hostname, port)
    recorded = _load(paths).lookup(entry)
    shown = f"{key.get_name()} {fingerprint(key)}"
    if recorded is not None and key.get_name() in recorded:
        if recorded[key.get_name()] == key:
            return
        raise HostKeyError(
            f"the host key of {entry} has CHANGED: it shows {shown}, which is not the key "
            f"recorded in {paths[0]}. Someone may be between you and the host; ask the "
            f"cluster's administrators. If they confirm the new key, remove the old one with "
            f"`ssh-keygen -R '{entry}'` and accept the new one with `hpcdet cluster trust "
            f"NAME`.")
    if accept is None:
        raise HostKeyError(
            f"the host key of {entry} is not known: it shows {shown}. Compare the fingerprint "
            f"with the one your cluster's administrators publish, then accept it with "
            f"`hpcdet cluster trust NAME` (or log in once with ssh and answer yes).")
    target = paths[0]
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with target.open("a", encoding="utf-8") as f:
        f.write(f"{entry} {key.get_name()} {key.get_base64()}\n")
    target.chmod(0o600)
    accept.append(f"accepted {entry}: {shown} (added to {target})")


def trust(host: str) -> list[str]:
    """Accept the keys that ``host`` (an ssh alias or user@host[:port]) and the bastions on
    its way show now, unknown ones only; the lines to print."""
    from hpcdet.remote.connect import fetch_host_keys
    from hpcdet.remote.endpoint import resolve

    accepted: list[str] = []
    fetch_host_keys(resolve(host), accepted)
    return accepted or [f"every host key on the way to {host} was already known"]
