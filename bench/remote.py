"""`hpcdet -c X experiment list` from a laptop over SSH (issue 41).

Usage: ``python -m bench.remote [RUNS]`` (default 10).

A real OpenSSH server on a loopback port of its own (its host key and the user's key made for
the run, key authentication) stands for the login node, with the same hpcdet and a small
local-backend state directory behind it. Figures: a warm ``hpcdet -c X e list`` (the keeper
holds the transport) against the same command run on the "login node" (a local process) plus
one SSH round trip (an exec of ``true`` on an open transport), in the same run; a cold
first command (no keeper: it starts, connects, checks the version, runs the command); and
the bytes and time of a second ``e create`` of an unchanged 20 MB context (200 files), which
sends nothing, against a create typed on the login node.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.figures import Figure, median, table

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_sshd(tmp: Path, env: dict[str, str], keys: Path | None = None,
               totp: str | None = None, netns: str | None = None,
               address: str = "127.0.0.1") -> tuple[subprocess.Popen[bytes], int, Path]:
    """A real OpenSSH server on a free loopback port, for this user with a key made here (its
    private key returned), its sessions given ``env``; the public key in ``keys`` (default
    ``tmp``), a directory other users may read for a test that logs in as them. With ``totp``
    (a hex secret) the key is not enough: a TOTP code is asked too, by Debian's pam_oath
    through keyboard-interactive (the PAM service, named after the server's program, is
    ``pam_service(tmp)``; remove it when done). With ``netns`` it runs in that network
    namespace, on port 22 of ``address`` there. tests/integration/test_remote_cli.py uses it
    too."""
    port = 22 if netns else _free_port()
    program = SSHD
    factor = "PermitRootLogin prohibit-password\nKbdInteractiveAuthentication no\nUsePAM no\n"
    if totp is not None:
        # sshd names its PAM service after the program it runs as: a link of its own gives
        # this server a PAM stack of its own without touching /etc/pam.d/sshd.
        program = str(tmp / f"hpcdet-test-sshd-{port}")
        os.symlink(SSHD, program)
        users = tmp / "users.oath"
        users.write_text(f"HOTP/T30 {getpass.getuser()} - {totp}\n")
        users.chmod(0o600)
        pam_service(tmp).write_text(
            f"auth requisite pam_oath.so usersfile={users} window=2 digits=6\n"
            "account required pam_permit.so\nsession required pam_permit.so\n")
        factor = ("KbdInteractiveAuthentication yes\nUsePAM yes\nPermitRootLogin yes\n"
                  "AuthenticationMethods publickey,keyboard-interactive\n")
    for name in ("host", "user"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / name)],
                       check=True)
    authorized = (keys or tmp) / "authorized_keys"
    authorized.write_text((tmp / "user.pub").read_text())
    authorized.chmod(0o644 if keys else 0o600)
    config = tmp / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress {address}\nHostKey {tmp / 'host'}\n"
        f"PidFile {tmp / 'sshd.pid'}\nAuthorizedKeysFile {authorized}\n"
        f"{factor}PasswordAuthentication no\nStrictModes no\nMaxSessions 100\n"
        f"Subsystem sftp internal-sftp\nSetEnv {' '.join(f'{k}={v}' for k, v in env.items())}\n")
    Path("/run/sshd").mkdir(exist_ok=True)
    # SIGINT's default for the server and so its sessions, as under systemd: a test run in
    # the background of a non-interactive shell ignores it, and the sessions would inherit that.
    inside = ["ip", "netns", "exec", netns] if netns else []
    server = subprocess.Popen(
        [*inside, program, "-D", "-f", str(config), "-E", str(tmp / "sshd.log")],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if netns:  # not reachable from here: it writes its pid file once it listens
            if (tmp / "sshd.pid").exists():
                break
        else:
            with socket.socket() as probe:
                if probe.connect_ex((address, port)) == 0:
                    break
        time.sleep(0.05)
    return server, port, tmp / "user"


def pam_service(tmp: Path) -> Path:
    """The PAM service file of ``start_sshd(tmp, ..., totp=...)``'s server."""
    link = next(tmp.glob("hpcdet-test-sshd-*"))
    return Path("/etc/pam.d") / link.name


def _timed(env: dict[str, str], *args: str) -> float:
    return _run(env, *args)[0]


def _run(env: dict[str, str], *args: str) -> tuple[float, str]:
    """The seconds ``hpcdet ARGS`` took, and its stderr."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "hpcdet.cli.entry", *args], env=env,
                          capture_output=True, text=True)
    took = time.perf_counter() - start
    assert done.returncode == 0, done.stderr
    return took, done.stderr


def _sent(stderr: str) -> int:
    """The bytes a create from the laptop said it sent."""
    found = re.search(r"^Sent (\d+) bytes", stderr, re.M)
    return int(found.group(1)) if found else 0


def _context(root: Path, files: int = 200, size: int = 100_000) -> Path:
    """A context of ``files`` files of ``size`` random bytes (20 MB by default), as code with
    a small dataset beside it."""
    ctx = root / "context"
    for i in range(files):
        path = ctx / f"pkg{i % 10}" / f"part{i}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))
    (ctx / "train.py").write_text("print('x')\n")
    (root / "const.yaml").write_text("entrypoint: python3 train.py\n"
                                     "searcher: {name: single, metric: x, max_length: 1}\n")
    return ctx


def _round_trip(host: str, port: int, key: Path, user: str, runs: int) -> float:
    import paramiko

    transport = paramiko.Transport(("127.0.0.1", port))
    transport.start_client(timeout=10)
    transport.auth_publickey(user, paramiko.Ed25519Key.from_private_key_file(str(key)))
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        channel = transport.open_session()
        channel.exec_command("true")
        channel.recv_exit_status()
        channel.close()
        took.append(time.perf_counter() - start)
    transport.close()
    return median(took)


def measure(runs: int) -> list[Figure]:
    import pwd

    user = pwd.getpwuid(os.getuid()).pw_name
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as name:
        tmp = Path(name)
        tmp.chmod(0o700)
        state, laptop = tmp / "state", tmp / "laptop"
        state.mkdir(mode=0o700)
        (laptop / ".ssh").mkdir(parents=True, mode=0o700)
        (tmp / "cluster.yaml").write_text("backend: local\n")
        server, port, key = start_sshd(tmp, {"HPCDET_HOME": str(state),
                                             "HPCDET_CLUSTER_CONFIG": str(tmp / "cluster.yaml")})
        try:
            host_key = (tmp / "host.pub").read_text().split()
            (laptop / ".ssh" / "known_hosts").write_text(
                f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
            (laptop / ".ssh" / "config").write_text(
                f"Host bench\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n"
                f"  IdentityFile {key}\n")
            here = {**os.environ, "HPCDET_HOME": str(state),
                    "HPCDET_CLUSTER_CONFIG": str(tmp / "cluster.yaml")}
            there = {**os.environ, "HOME": str(laptop), "XDG_CONFIG_HOME": str(laptop / "cfg"),
                     "HPCDET_KEEPER_DIR": str(tmp / "keeper"), "SSH_AUTH_SOCK": ""}
            there.pop("HPCDET_CLUSTER", None)
            hpcdet = f"{sys.executable} -m hpcdet.cli.main"
            subprocess.run([sys.executable, "-m", "hpcdet.cli.main", "cluster", "add", "x",
                            "--ssh", "bench", "--hpcdet", hpcdet], env=there, check=True,
                           capture_output=True)
            _timed(here, "daemon", "start")
            cold = _timed(there, "-c", "x", "e", "list")
            local = median([_timed(here, "e", "list") for _ in range(runs)])
            trip = _round_trip("127.0.0.1", port, key, user, runs)
            warm = median([_timed(there, "-c", "x", "e", "list") for _ in range(runs)])
            version = median([_timed(there, "version") for _ in range(runs)])
            ctx = _context(tmp)
            create = ["e", "create", "--paused", str(tmp / "const.yaml"), str(ctx)]
            first, said = _run(there, "-c", "x", *create)
            first_sent = _sent(said)
            again = [_run(there, "-c", "x", *create) for _ in range(max(1, runs // 3))]
            again_sent = max(_sent(err) for _, err in again)
            on_login = median([_timed(here, *create) for _ in range(max(1, runs // 3))])
            _timed(here, "daemon", "stop")
        finally:
            pid_file = tmp / "keeper" / "keeper.pid"
            if pid_file.exists():
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            server.terminate()
            server.wait(timeout=10)
    note = (f"the laptop's own start-up (`hpcdet version`, {version:.2f} s) is part of the "
            "warm figure and not of the baseline; key authentication, no second factor")
    return [
        Figure("remote", "hpcdet -c X e list, warm (keeper holds the transport)", warm, "s",
               "e list on the login node + one SSH round trip", local + trip, "<= 1.3x",
               warm <= 1.3 * (local + trip), note=note),
        Figure("remote", "hpcdet -c X e list, cold (keeper start, connect, version check)",
               cold, "s", "e list on the login node", local, "<= 2 s + authentication",
               cold <= 2.0),
        Figure("remote", "bytes a second e create of an unchanged 20 MB context sends",
               again_sent, "bytes", "the first create's", first_sent, "0 bytes",
               again_sent == 0),
        Figure("remote", "a second e create of an unchanged 20 MB context from the laptop",
               median([t for t, _ in again]), "s", "e create on the login node", on_login,
               note=f"the first, which sent {first_sent / 1e6:.1f} MB, took {first:.2f} s"),
    ]


if __name__ == "__main__":
    print(table(measure(*[int(a) for a in sys.argv[1:]] or [10])))
