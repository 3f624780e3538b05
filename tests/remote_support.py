"""A laptop for the remote tests (issue 41): its own home with an ssh config and known
hosts, a keeper directory, and `hpcdet -c x` pointing at a real OpenSSH server
(`bench.remote.start_sshd`) in front of a real hpcdet and daemon on the local backend; or a
login node reached only through a bastion, each in a network namespace of its own."""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.remote import pam_service, start_sshd
from tests.support import Hpcdet, require_root

CLI = [sys.executable, "-m", "hpcdet.cli.entry"]


@dataclass
class Laptop:
    env: dict[str, str]
    keeper: Path
    server: subprocess.Popen[bytes]  # the login node's sshd

    def cut(self) -> None:
        """Every SSH connection to the login node broken, as a network that drops them."""
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid == self.server.pid:
                    os.kill(int(proc.name), signal.SIGKILL)

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False, stdin=subprocess.DEVNULL)

    def keeper_pid(self) -> int:
        return int((self.keeper / "keeper.pid").read_text())


@contextlib.contextmanager
def laptop_for(h: Hpcdet, tmp_path: Path, totp: str | None = None) -> Iterator[Laptop]:
    require_root("sshd runs as root and lets this user in with a key")
    server_dir = tmp_path / "sshd"
    server_dir.mkdir(mode=0o700)
    keys = Path(tempfile.mkdtemp(prefix="hpcdet-test-keys-", dir="/tmp"))
    keys.chmod(0o755)  # a public key, read by sshd as each user it lets in
    there = h.env()
    server, port, key = start_sshd(server_dir, {
        k: there[k] for k in ("HPCDET_HOME", "HPCDET_CLUSTER_CONFIG", "HPCDET_SITE_CONFIG")},
        keys, totp)
    home = tmp_path / "laptop"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    kind, blob = (server_dir / "host.pub").read_text().split()[:2]
    (home / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{port} {kind} {blob}\n")
    user = pwd.getpwuid(os.getuid()).pw_name
    (home / ".ssh" / "config").write_text(
        f"Host login\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n"
        f"  IdentityFile {key}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HPCDET_", "SSH_"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               HPCDET_KEEPER_DIR=str(tmp_path / "keeper"))
    lap = Laptop(env, tmp_path / "keeper", server)
    added = lap.run("cluster", "add", "x", "--ssh", "login", "--hpcdet",
                    f"{sys.executable} -m hpcdet.cli.main")
    assert added.returncode == 0, added.stderr
    try:
        yield lap
    finally:
        if (home / ".hpcdet").exists():  # a `-c local` command started the laptop's own daemon
            lap.run("-c", "local", "daemon", "stop")
        if (lap.keeper / "keeper.pid").exists():
            try:
                os.kill(lap.keeper_pid(), signal.SIGTERM)
            except ProcessLookupError:
                pass
        server.terminate()
        server.wait(timeout=10)
        if totp is not None:
            pam_service(server_dir).unlink()
        shutil.rmtree(keys, ignore_errors=True)


def interruptible() -> None:
    """Ctrl-C's default back for a command these tests interrupt: a runner started in the
    background of a non-interactive shell (`bash .ci/run &`) ignores SIGINT, every process
    under it inherits that, and Python then leaves SIGINT ignored instead of raising
    KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def experiment(h: Hpcdet, tmp_path: Path, script: str) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "t.py").write_text(script)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("name: far\nentrypoint: python3 t.py\n"
                   "searcher: {name: single, metric: x, max_length: 1}\n")
    h.create(cfg, ctx)


def code_context(root: Path) -> Path:
    ctx = root / "code"
    (ctx / "pkg").mkdir(parents=True)
    (ctx / "pkg" / "model.py").write_text("WIDTH = 4\n")
    (ctx / "run.sh").write_text("#!/bin/sh\npython3 train.py\n")
    (ctx / "run.sh").chmod(0o750)
    (ctx / "train.py").write_text("from pkg.model import WIDTH\nprint('width', WIDTH)\n")
    (ctx / "data").mkdir()
    (ctx / "data" / "big.bin").write_bytes(b"x" * 3_000_000)
    (ctx / ".detignore").write_text("data/\n")
    (root / "const.yaml").write_text("name: uploaded\nentrypoint: python3 train.py\n"
                                     "searcher: {name: single, metric: x, max_length: 1}\n")
    return ctx


def sent_bytes(stderr: str) -> int:
    """The bytes a create said it sent (0 for nothing)."""
    if re.search(r"^Sent nothing to x: its copy of the \d+ files is up to date$", stderr, re.M):
        return 0
    found = re.search(r"^Sent (\d+) bytes of \d+ of \d+ files to x$", stderr, re.M)
    assert found, stderr
    return int(found.group(1))


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(root.rglob("*")) if p.is_file()}


def ip(*args: str, netns: str | None = None) -> None:
    inside = ["ip", "netns", "exec", netns] if netns else []
    subprocess.run([*inside, "ip", *args], check=True, capture_output=True)


@contextlib.contextmanager
def behind_a_bastion(h: Hpcdet, tmp_path: Path) -> Iterator[tuple[Laptop, str]]:
    """A login node in a network namespace of its own that this machine has no route to,
    reached only through a bastion in a second namespace (ProxyJump); both real sshd's. Yields
    the laptop and the login node's namespace."""
    require_root("network namespaces and sshd need root")
    tag = f"hd{os.getpid() % 10000}"
    net = f"10.213.{os.getpid() % 250}"
    bastion_ns, login_ns = f"{tag}-bastion", f"{tag}-login"
    started: list[subprocess.Popen[bytes]] = []
    keys = Path(tempfile.mkdtemp(prefix="hpcdet-test-keys-", dir="/tmp"))
    keys.chmod(0o755)  # the public keys, read by sshd as the user it lets in
    try:
        for ns in (bastion_ns, login_ns):
            ip("netns", "add", ns)
            ip("link", "set", "lo", "up", netns=ns)
        # laptop (here) <-> bastion: .1.x; bastion <-> login: .2.x; nothing forwards between.
        ip("link", "add", f"{tag}h", "type", "veth", "peer", "name", f"{tag}b")
        ip("link", "set", f"{tag}b", "netns", bastion_ns)
        ip("addr", "add", f"{net}.1/30", "dev", f"{tag}h")
        ip("link", "set", f"{tag}h", "up")
        ip("addr", "add", f"{net}.2/30", "dev", f"{tag}b", netns=bastion_ns)
        ip("link", "set", f"{tag}b", "up", netns=bastion_ns)
        ip("link", "add", f"{tag}x", "type", "veth", "peer", "name", f"{tag}l",
            netns=bastion_ns)
        ip("link", "set", f"{tag}l", "netns", login_ns, netns=bastion_ns)
        ip("addr", "add", f"{net}.5/30", "dev", f"{tag}x", netns=bastion_ns)
        ip("link", "set", f"{tag}x", "up", netns=bastion_ns)
        ip("addr", "add", f"{net}.6/30", "dev", f"{tag}l", netns=login_ns)
        ip("link", "set", f"{tag}l", "up", netns=login_ns)
        there = h.env()
        found = {}
        for name, ns, address in (("bastion", bastion_ns, f"{net}.2"),
                                  ("login", login_ns, f"{net}.6")):
            server_dir = tmp_path / name
            server_dir.mkdir(mode=0o700)
            (keys / name).mkdir()
            server, _, key = start_sshd(server_dir, {k: there[k] for k in (
                "HPCDET_HOME", "HPCDET_CLUSTER_CONFIG", "HPCDET_SITE_CONFIG")},
                keys / name, netns=ns, address=address)
            started.append(server)
            kind, blob = (server_dir / "host.pub").read_text().split()[:2]
            found[name] = (address, key, f"{address} {kind} {blob}\n")
        home = tmp_path / "laptop"
        (home / ".ssh").mkdir(parents=True, mode=0o700)
        (home / ".ssh" / "known_hosts").write_text(found["bastion"][2] + found["login"][2])
        user = pwd.getpwuid(os.getuid()).pw_name
        (home / ".ssh" / "config").write_text(
            f"Host bastion\n  HostName {found['bastion'][0]}\n  User {user}\n"
            f"  IdentityFile {found['bastion'][1]}\n"
            f"Host login\n  HostName {found['login'][0]}\n  User {user}\n"
            f"  IdentityFile {found['login'][1]}\n  ProxyJump bastion\n"
            f"Host direct\n  HostName {found['login'][0]}\n  User {user}\n"
            f"  IdentityFile {found['login'][1]}\n  ConnectTimeout 5\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HPCDET_", "SSH_"))}
        env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                   HPCDET_KEEPER_DIR=str(tmp_path / "keeper"))
        lap = Laptop(env, tmp_path / "keeper", started[-1])
        for name, host in (("x", "login"), ("direct", "direct")):
            added = lap.run("cluster", "add", name, "--ssh", host, "--hpcdet",
                            f"{sys.executable} -m hpcdet.cli.main")
            assert added.returncode == 0, added.stderr
        yield lap, login_ns
    finally:
        if (tmp_path / "keeper" / "keeper.pid").exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int((tmp_path / "keeper" / "keeper.pid").read_text()), signal.SIGTERM)
        for server in started:
            server.terminate()
            server.wait(timeout=10)
        for ns in (bastion_ns, login_ns):
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
        shutil.rmtree(keys, ignore_errors=True)
        subprocess.run(["ip", "link", "del", f"{tag}h"], check=False, capture_output=True)
