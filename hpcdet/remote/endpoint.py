"""One SSH host as the user's ``~/.ssh/config`` describes it (HostName, User, Port,
IdentityFile, ProxyJump, ProxyCommand), resolved the way ssh(1) resolves it."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from pathlib import Path

import paramiko

from hpcdet.errors import ConfigError


@dataclass(frozen=True)
class Endpoint:
    alias: str
    hostname: str
    user: str
    port: int
    identity_files: tuple[str, ...]
    proxy_jump: tuple[str, ...]
    proxy_command: str | None


def ssh_config_path() -> Path:
    return Path.home() / ".ssh" / "config"


def _split_target(host: str) -> tuple[str | None, str, int | None]:
    """``user@host:port`` (ProxyJump's and ``--ssh``'s form) into its parts."""
    user, _, rest = host.rpartition("@")
    port: int | None = None
    name = rest
    if rest.startswith("["):  # [ipv6]:port
        name, _, tail = rest[1:].partition("]")
        if tail.startswith(":"):
            port = int(tail[1:])
    elif rest.count(":") == 1:
        name, _, text = rest.partition(":")
        try:
            port = int(text)
        except ValueError:
            raise ConfigError(f"ssh host {host!r}: the port {text!r} is not a number") from None
    return user or None, name, port


def resolve(host: str, ssh_config: Path | None = None) -> Endpoint:
    """``host`` (an alias of ``~/.ssh/config`` or ``[user@]name[:port]``) as ssh would reach
    it."""
    user, name, port = _split_target(host)
    config = paramiko.SSHConfig()
    path = ssh_config or ssh_config_path()
    if path.is_file():
        try:
            config = paramiko.SSHConfig.from_path(str(path))
        except Exception as e:  # paramiko raises several kinds for a malformed file
            raise ConfigError(f"{path}: {e}; fix the file (ssh -G {name} shows what ssh "
                              "makes of it)") from None
    found = config.lookup(name)
    jump = str(found.get("proxyjump", "") or "")
    command = found.get("proxycommand")
    if jump.lower() == "none":
        jump = ""
    if command is not None and str(command).lower() == "none":
        command = None
    return Endpoint(
        alias=host,
        hostname=str(found.get("hostname", name)),
        user=user or str(found.get("user", "") or getpass.getuser()),
        port=port or int(found.get("port", 22)),
        identity_files=tuple(os.path.expanduser(f) for f in found.get("identityfile", [])),
        proxy_jump=tuple(h.strip() for h in jump.split(",") if h.strip()),
        proxy_command=str(command) if command else None,
    )
