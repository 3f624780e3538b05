"""The keeper as a real process: its private directory, one per user, its idle exit, and a
cluster it cannot reach said as an error, never a traceback."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcdet.private import PrivacyError
from hpcdet.remote import place, wire
from hpcdet.remote.session import connect_keeper


def _gone(pid: int) -> bool:
    """Ended (a zombie too: the test started it, and reaps it only when it exits)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture
def keeper_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    directory = tmp_path / "keeper"
    monkeypatch.setenv(place.ENV_DIR, str(directory))
    monkeypatch.setenv(place.ENV_IDLE, "1")
    yield directory
    pid_file = directory / "keeper.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        if not _gone(pid):
            os.kill(pid, 15)


def test_one_keeper_in_a_private_directory_that_leaves_when_idle(keeper_env: Path) -> None:
    first = connect_keeper()
    second = connect_keeper()
    first.close()
    second.close()
    assert stat.S_IMODE(keeper_env.stat().st_mode) == 0o700
    assert stat.S_ISSOCK((keeper_env / "keeper.sock").stat().st_mode)
    pid = int((keeper_env / "keeper.pid").read_text())
    # A second keeper started by hand sees the lock and leaves at once.
    late = subprocess.run([sys.executable, "-m", "hpcdet.remote.keeper"], timeout=30,
                          env=os.environ.copy())
    assert late.returncode == 0 and not _gone(pid)
    deadline = time.monotonic() + 15
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(pid), "the keeper did not leave after its idle time"
    assert not (keeper_env / "keeper.sock").exists()
    assert "left after 1 s idle" in (keeper_env / "keeper.log").read_text()


def test_a_keeper_directory_of_another_user_is_refused(keeper_env: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to make a directory another user owns")  # the CI runs as root
    keeper_env.mkdir(mode=0o700)
    os.chown(keeper_env, 65534, 65534)
    with pytest.raises(PrivacyError, match="not by you"):
        connect_keeper()


def test_a_frame_out_of_order_ends_only_that_connection(keeper_env: Path) -> None:
    sock = connect_keeper()
    with sock:
        wire.send(sock, wire.STDIN, b"no open first")
        assert wire.receive(sock) is None
    again = connect_keeper()  # the keeper still serves
    again.close()


def test_an_unreachable_cluster_is_a_clear_error(keeper_env: Path, tmp_path: Path) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host nowhere\n  HostName 127.0.0.1\n  Port {port}\n  User nobody\n")
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    cli = [sys.executable, "-m", "hpcdet.cli.main"]
    subprocess.run([*cli, "cluster", "add", "far", "--ssh", "nowhere"], env=env, check=True,
                   capture_output=True)
    done = subprocess.run([*cli, "-c", "far", "e", "list"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("Error: cannot reach 127.0.0.1:"), done.stderr
    assert "(nowhere): " in done.stderr and "Traceback" not in done.stderr
    assert "Traceback" not in done.stderr
    listed = subprocess.run([*cli, "cluster", "list"], env=env, capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0
    assert "far *" in listed.stdout and "no: cannot reach" in listed.stdout


@pytest.mark.parametrize("value", ["soon", "0", "-5", "nan", "inf"])
def test_a_bad_idle_time_is_said_before_a_keeper_starts(
        keeper_env: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from hpcdet.errors import UsageError
    from hpcdet.remote.session import connect_keeper

    monkeypatch.setenv(place.ENV_IDLE, value)
    with pytest.raises(UsageError, match=f"HPCDET_KEEPER_IDLE='{value}' is not a number of "):
        connect_keeper()
    assert not (keeper_env / "keeper.sock").exists()


def test_the_idle_time_defaults_to_half_an_hour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(place.ENV_IDLE, raising=False)
    assert place.idle_seconds() == 1800
    monkeypatch.setenv(place.ENV_IDLE, "90")
    assert place.idle_seconds() == 90
