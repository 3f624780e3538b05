"""One authenticated SSH transport to a login node, through its bastions (ProxyJump) or a
ProxyCommand, with strict host keys at every hop. Keys come from the agent and the
IdentityFiles; keyboard-interactive prompts (a second factor, a passphrase) go to the caller's
``Prompter`` and are never written anywhere."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import paramiko

from hpcdet.errors import RemoteAuthError
from hpcdet.remote import hostkeys
from hpcdet.remote.endpoint import Endpoint, resolve

# (title, instructions, [(prompt, echo)]) -> the answers, in order
Prompter = Callable[[str, str, list[tuple[str, bool]]], list[str]]

_DEFAULT_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa")


class Transport(paramiko.Transport):  # type: ignore[misc]  # paramiko is untyped
    """A transport that closes the bastions' transports it was tunnelled through."""

    hops: list[paramiko.Transport]

    def __init__(self, sock: Any) -> None:
        super().__init__(sock)
        self.hops = []

    def close(self) -> None:
        super().close()
        for hop in reversed(self.hops):
            hop.close()


def _via(endpoint: Endpoint) -> Endpoint:
    """The last bastion of ``endpoint``'s ProxyJump chain, reached through the ones before."""
    *before, last = endpoint.proxy_jump
    hop = resolve(last)
    return Endpoint(hop.alias, hop.hostname, hop.user, hop.port, hop.identity_files,
                    tuple(before) or hop.proxy_jump, None if before else hop.proxy_command)


def _socket(endpoint: Endpoint, prompter: Prompter, known: Sequence[Path] | None,
            timeout: float, accept: list[str] | None) -> tuple[Any, list[paramiko.Transport]]:
    if endpoint.proxy_jump:
        hop = open_transport(_via(endpoint), prompter, known_hosts=known, timeout=timeout,
                             accept=accept)
        try:
            channel = hop.open_channel("direct-tcpip", (endpoint.hostname, endpoint.port),
                                       ("127.0.0.1", 0), timeout=timeout)
        except (paramiko.SSHException, OSError) as e:
            hop.close()
            raise RemoteAuthError(
                f"the bastion {hop.getpeername()[0]} would not open a way to "
                f"{endpoint.hostname}:{endpoint.port}: {e}") from None
        return channel, [hop]
    if endpoint.proxy_command:
        return paramiko.ProxyCommand(endpoint.proxy_command), []
    try:
        return socket.create_connection((endpoint.hostname, endpoint.port), timeout), []
    except OSError as e:
        raise RemoteAuthError(
            f"cannot reach {endpoint.hostname}:{endpoint.port} ({endpoint.alias}): {e}") from None


def _started(endpoint: Endpoint, prompter: Prompter, known: Sequence[Path] | None,
             timeout: float, accept: list[str] | None) -> Transport:
    sock, hops = _socket(endpoint, prompter, known, timeout, accept)
    transport = Transport(sock)
    transport.hops = hops
    try:
        transport.start_client(timeout=timeout)
        hostkeys.check(endpoint.hostname, endpoint.port, transport.get_remote_server_key(),
                       known, accept)
    except BaseException:
        transport.close()
        raise
    return transport


def _keys(endpoint: Endpoint, prompter: Prompter) -> list[paramiko.PKey]:
    keys: list[paramiko.PKey] = []
    if os.environ.get("SSH_AUTH_SOCK"):
        keys.extend(paramiko.Agent().get_keys())
    files = endpoint.identity_files or tuple(
        str(Path.home() / ".ssh" / name) for name in _DEFAULT_KEYS)
    for name in files:
        if not Path(name).is_file():
            continue
        try:
            keys.append(paramiko.PKey.from_path(name))
        except paramiko.PasswordRequiredException:
            answer = prompter("", "", [(f"Enter passphrase for key '{name}': ", False)])
            try:
                keys.append(paramiko.PKey.from_path(name, passphrase=answer[0] if answer
                                                    else None))
            except paramiko.SSHException as e:
                raise RemoteAuthError(f"the key {name} could not be opened: {e}") from None
        except (paramiko.SSHException, OSError, ValueError) as e:
            raise RemoteAuthError(f"the key {name} could not be read: {e}") from None
    return keys


def _authenticate(transport: paramiko.Transport, endpoint: Endpoint,
                  prompter: Prompter) -> None:
    tried: list[str] = []
    remaining: list[str] = []
    for key in _keys(endpoint, prompter):
        try:
            remaining = list(transport.auth_publickey(endpoint.user, key))
        except paramiko.BadAuthenticationType as e:
            remaining = list(e.allowed_types)
            tried.append("publickey (not offered by the server)")
            break
        except paramiko.AuthenticationException:
            tried.append(f"the {key.get_name()} key {hostkeys.fingerprint(key)}")
            continue
        if transport.is_authenticated():
            return
        break  # partial success: the key was taken, the server asks for more
    if not remaining or "keyboard-interactive" in remaining:
        try:
            transport.auth_interactive(endpoint.user, prompter)
        except paramiko.BadAuthenticationType as e:
            tried.append(f"keyboard-interactive (the server offers {', '.join(e.allowed_types)})")
        except paramiko.AuthenticationException:
            tried.append("keyboard-interactive (the answers were refused)")
        if transport.is_authenticated():
            return
    transport.close()
    raise RemoteAuthError(
        f"{endpoint.user}@{endpoint.hostname}:{endpoint.port} ({endpoint.alias}) refused every "
        f"way tried: {'; '.join(tried) or 'no key found'}. hpcdet never sends a password: "
        f"give the host a key (IdentityFile in ~/.ssh/config, or ssh-agent) and check that "
        f"`ssh {endpoint.alias}` logs in.")


def open_transport(endpoint: Endpoint, prompter: Prompter, *,
                   known_hosts: Sequence[Path] | None = None, timeout: float = 20.0,
                   accept: list[str] | None = None) -> paramiko.Transport:
    """An authenticated transport to ``endpoint``; ``accept`` as ``hostkeys.check``'s."""
    transport = _started(endpoint, prompter, known_hosts, timeout, accept)
    try:
        _authenticate(transport, endpoint, prompter)
    except BaseException:
        transport.close()
        raise
    return transport


def fetch_host_keys(endpoint: Endpoint, accept: list[str]) -> None:
    """Accept (into known_hosts) the unknown keys of ``endpoint`` and its bastions; the
    bastions are authenticated to pass through (their prompts asked on this terminal), the
    endpoint itself is not."""
    from hpcdet.remote.session import answer

    _started(endpoint, answer, None, 20.0, accept).close()
