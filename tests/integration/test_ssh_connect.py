"""The SSH transport of `hpcdet -c` against real OpenSSH servers on loopback ports: strict host
keys, `cluster trust`, a bastion by ProxyJump and by ProxyCommand, a key refused."""

from __future__ import annotations

import getpass
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import paramiko
import pytest

from bench.remote import start_sshd
from hpcdet.errors import HostKeyError, RemoteAuthError
from hpcdet.remote import hostkeys
from hpcdet.remote.connect import open_transport
from hpcdet.remote.endpoint import resolve
from tests.support import require_root


@dataclass
class Hosts:
    home: Path
    login_port: int
    bastion_port: int
    login_key: paramiko.PKey  # the login node's host key
    bastion_key: paramiko.PKey

    @property
    def known_hosts(self) -> Path:
        return self.home / ".ssh" / "known_hosts"

    def know(self, *entries: tuple[int, paramiko.PKey]) -> None:
        self.known_hosts.write_text("".join(
            f"[127.0.0.1]:{port} {key.get_name()} {key.get_base64()}\n" for port, key in entries))


def _no_prompts(title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
    raise AssertionError(f"asked {prompts}")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[Path, int, Path, int, Path]]:
    require_root("sshd runs as root")
    base = tmp_path_factory.mktemp("ssh")
    started = []
    for name in ("login", "bastion"):
        (base / name).mkdir()
        started.append(start_sshd(base / name, {"HPCDET_TEST": "1"}))
    yield (base, started[0][1], started[0][2], started[1][1], started[1][2])
    for server, _, _ in started:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def hosts(servers: tuple[Path, int, Path, int, Path], tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Hosts:
    base, login_port, login_user_key, bastion_port, bastion_user_key = servers
    home = tmp_path / "laptop"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    user = getpass.getuser()
    (home / ".ssh" / "config").write_text(
        f"Host login\n  HostName 127.0.0.1\n  Port {login_port}\n  User {user}\n"
        f"  IdentityFile {login_user_key}\n"
        f"Host bastion\n  HostName 127.0.0.1\n  Port {bastion_port}\n  User {user}\n"
        f"  IdentityFile {bastion_user_key}\n"
        "Host via-jump\n  HostName 127.0.0.1\n"
        f"  Port {login_port}\n  User {user}\n  IdentityFile {login_user_key}\n"
        "  ProxyJump bastion\n"
        "Host via-command\n  HostName 127.0.0.1\n"
        f"  Port {login_port}\n  User {user}\n  IdentityFile {login_user_key}\n"
        f"  ProxyCommand ssh -q -F {home}/.ssh/config -o BatchMode=yes "
        f"-o UserKnownHostsFile={home}/.ssh/known_hosts -W %h:%p bastion\n"
        f"Host wrong-key\n  HostName 127.0.0.1\n  Port {login_port}\n  User {user}\n"
        f"  IdentityFile {bastion_user_key}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SSH_AUTH_SOCK", "")
    return Hosts(home, login_port, bastion_port,
                 paramiko.PKey.from_path(str(base / "login" / "host")),
                 paramiko.PKey.from_path(str(base / "bastion" / "host")))


def _echo(transport: paramiko.Transport) -> str:
    channel = transport.open_session()
    channel.exec_command("echo ok")
    out = channel.makefile("rb").read().decode()
    assert channel.recv_exit_status() == 0
    return out.strip()


def test_an_unknown_host_key_is_refused_with_its_fingerprint(hosts: Hosts) -> None:
    with pytest.raises(HostKeyError) as refused:
        open_transport(resolve("login"), _no_prompts)
    message = str(refused.value)
    assert hostkeys.fingerprint(hosts.login_key) in message
    assert "not known" in message and "hpcdet cluster trust" in message


def test_a_changed_host_key_is_refused_and_trust_does_not_take_it(hosts: Hosts) -> None:
    hosts.know((hosts.login_port, hosts.bastion_key))  # another key of the same type
    recorded = hosts.known_hosts.read_text()
    for attempt in (lambda: open_transport(resolve("login"), _no_prompts),
                    lambda: hostkeys.trust("login")):
        with pytest.raises(HostKeyError) as refused:
            attempt()
        assert "CHANGED" in str(refused.value)
        assert hostkeys.fingerprint(hosts.login_key) in str(refused.value)
        assert "ssh-keygen -R" in str(refused.value)
    assert hosts.known_hosts.read_text() == recorded


def test_trust_records_the_key_once_then_the_host_connects(hosts: Hosts) -> None:
    said = hostkeys.trust("login")
    assert len(said) == 1 and hostkeys.fingerprint(hosts.login_key) in said[0]
    assert hostkeys.trust("login") == ["every host key on the way to login was already known"]
    assert len(hosts.known_hosts.read_text().splitlines()) == 1
    assert hosts.known_hosts.stat().st_mode & 0o077 == 0
    transport = open_transport(resolve("login"), _no_prompts)
    try:
        assert _echo(transport) == "ok"
    finally:
        transport.close()


@pytest.mark.parametrize("alias", ["via-jump", "via-command"])
def test_the_login_node_through_a_bastion(hosts: Hosts, alias: str) -> None:
    hosts.know((hosts.login_port, hosts.login_key), (hosts.bastion_port, hosts.bastion_key))
    transport = open_transport(resolve(alias), _no_prompts)
    try:
        assert [_echo(transport) for _ in range(3)] == ["ok"] * 3
    finally:
        transport.close()
    if alias == "via-jump":
        assert all(not hop.is_active() for hop in getattr(transport, "hops", []))


def test_a_bastion_s_unknown_key_is_refused_too(hosts: Hosts) -> None:
    hosts.know((hosts.login_port, hosts.login_key))
    with pytest.raises(HostKeyError) as refused:
        open_transport(resolve("via-jump"), _no_prompts)
    assert hostkeys.fingerprint(hosts.bastion_key) in str(refused.value)
    assert f"[127.0.0.1]:{hosts.bastion_port}" in str(refused.value)


def test_a_refused_key_is_a_clear_error_and_no_password_is_tried(hosts: Hosts) -> None:
    hosts.know((hosts.login_port, hosts.login_key))
    with pytest.raises(RemoteAuthError) as refused:
        open_transport(resolve("wrong-key"), _no_prompts)
    assert "never sends a password" in str(refused.value)
    assert "ssh wrong-key" in str(refused.value)
    # the same as the command line says it
    done = subprocess.run(["ssh", "-F", str(hosts.home / ".ssh" / "config"), "-o",
                           "BatchMode=yes", "-o", f"UserKnownHostsFile={hosts.known_hosts}",
                           "wrong-key", "true"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 255
