"""hpcdet from a laptop (issue 41): every command run on the login node through the keeper,
against a real OpenSSH server in front of a real hpcdet and daemon on the local backend
(`tests/remote_support.py`)."""

from __future__ import annotations

import json
import os
import pwd
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.remote_support import (
    CLI,
    Laptop,
    behind_a_bastion,
    code_context,
    experiment,
    interruptible,
    laptop_for,
)
from tests.support import Hpcdet


def test_a_second_factor_is_asked_once_for_many_commands(local_hpcdet: Hpcdet,
                                                        tmp_path: Path) -> None:
    # Debian's pam_oath asks a TOTP code after the key (publickey,keyboard-interactive); the
    # keeper's one transport carries every later command without asking again.
    secret = "3132333435363738393031323334353637383930"
    asked = tmp_path / "asked"
    askpass = tmp_path / "askpass"
    askpass.write_text(f'#!/bin/sh\necho "$1" >> {asked}\nexec oathtool --totp {secret}\n')
    askpass.chmod(0o700)
    with laptop_for(local_hpcdet, tmp_path, totp=secret) as lap:
        lap.env["HPCDET_ASKPASS"] = str(askpass)
        listed = [lap.run("-c", "x", "e", "list") for _ in range(4)]
        assert [r.returncode for r in listed] == [0] * 4, listed[0].stderr
        assert asked.read_text().splitlines() == ["One-time password (OATH) for `root': "]
        # a wrong code is refused, said plainly, and nothing is retried with it
        os.kill(lap.keeper_pid(), signal.SIGTERM)
        askpass.write_text(f'#!/bin/sh\necho "$1" >> {asked}\necho 000000\n')
        refused = lap.run("-c", "x", "e", "list")
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert "keyboard-interactive (the answers were refused)" in refused.stderr
        assert len(asked.read_text().splitlines()) == 2


def test_output_and_exit_code_are_the_login_nodes(laptop: tuple[Laptop, Hpcdet],
                                                  tmp_path: Path) -> None:
    lap, h = laptop
    experiment(h, tmp_path, "print('hello from the trial')\n")
    h.run("e", "wait", "1")  # nothing changes between the two runs of a command
    for argv in (["e", "list"], ["e", "describe", "1"], ["e", "describe", "99"],
                 ["t", "describe", "0"], ["t", "logs", "1"], ["e", "config", "1"]):
        here = h.run(*argv, check=False)
        far = lap.run("-c", "x", *argv)
        assert (far.returncode, far.stdout, far.stderr) == (
            here.returncode, here.stdout, here.stderr), argv
    shown = lap.run("-c", "x", "cluster", "show")  # the login node's (its load varies)
    assert shown.returncode == 0 and "backend in use: local" in shown.stdout
    # The default cluster and HPCDET_CLUSTER choose it too; `-c local` is the laptop.
    assert lap.run("e", "list").stdout == h.run("e", "list").stdout
    alone = lap.run("-c", "local", "e", "list")
    assert "far" not in alone.stdout
    pid = lap.keeper_pid()
    assert all(lap.run("-c", "x", "e", "list").returncode == 0 for _ in range(3))
    assert lap.keeper_pid() == pid  # one keeper, one transport, many commands


def test_logs_follow_streams_as_the_trial_writes(laptop: tuple[Laptop, Hpcdet],
                                                 tmp_path: Path) -> None:
    lap, h = laptop
    flag = tmp_path / "go-on"
    experiment(h, tmp_path, "import os, time\nprint('first line', flush=True)\n"
                f"while not os.path.exists({str(flag)!r}):\n    time.sleep(0.2)\n"
                "print('second line', flush=True)\n")
    follow = subprocess.Popen([*CLI, "-c", "x", "t", "logs", "-f", "1"], env=lap.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert follow.stdout is not None
    try:
        seen = ""
        deadline = time.monotonic() + 120
        while "first line" not in seen and time.monotonic() < deadline:
            seen += follow.stdout.readline()
        assert "first line" in seen and "second line" not in seen  # before the trial ended
        lap.cut()  # the network drops: the laptop goes on where it stopped, nothing twice
        time.sleep(0.5)
        flag.touch()
        rest, err = follow.communicate(timeout=120)
        assert "second line" in rest and follow.returncode == 0, err
        assert "first line" not in rest and "going on where it stopped" in err
    finally:
        if follow.poll() is None:
            follow.kill()


def test_the_keeper_killed_the_next_command_reconnects(laptop: tuple[Laptop, Hpcdet]) -> None:
    lap, h = laptop
    assert lap.run("-c", "x", "e", "list").returncode == 0
    old = lap.keeper_pid()
    os.kill(old, signal.SIGKILL)
    again = lap.run("-c", "x", "e", "list")
    assert again.returncode == 0, again.stderr
    assert again.stdout == h.run("e", "list").stdout
    assert lap.keeper_pid() != old


def test_no_hpcdet_on_the_login_node_says_what_to_run(laptop: tuple[Laptop, Hpcdet]) -> None:
    lap, _ = laptop
    assert lap.run("cluster", "add", "bare", "--ssh", "login", "--hpcdet",
                   "/nonexistent/bin/hpcdet").returncode == 0
    done = lap.run("-c", "bare", "e", "list")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    from hpcdet import __version__

    assert done.stderr.startswith("Error: no working hpcdet on the login node of bare (login)")
    assert f"python3 -m pip install --user hpcdet=={__version__}" in done.stderr
    assert "hpcdet cluster add bare --ssh login --hpcdet PATH" in done.stderr
    # Another version there: said, never a traceback.
    assert lap.run("cluster", "add", "old", "--ssh", "login", "--hpcdet",
                   "/bin/echo hpcdet 0.0.1").returncode == 0
    older = lap.run("-c", "old", "e", "list")
    assert older.returncode == 1 and "Traceback" not in older.stderr
    assert older.stderr.startswith(
        f"Error: the login node of old has hpcdet 0.0.1, this laptop hpcdet {__version__}")
    assert f"python3 -m pip install --user hpcdet=={__version__}" in older.stderr
    # The laptop's own commands stay here whatever cluster is chosen.
    assert lap.run("-c", "old", "version").stdout.startswith(f"hpcdet {__version__} ")
    listed = lap.run("cluster", "list")
    assert re.search(r"x \*? *\| login \| yes +\| " + re.escape(__version__), listed.stdout), \
        listed.stdout
    assert "bare" in listed.stdout and "no: no working hpcdet" in listed.stdout


def test_the_ui_reaches_the_laptop_through_a_loopback_port(
        laptop: tuple[Laptop, Hpcdet], tmp_path: Path) -> None:
    lap, h = laptop
    experiment(h, tmp_path, "print('x')\n")
    ui = subprocess.Popen([*CLI, "-c", "x", "ui"], env=lap.env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    assert ui.stdout is not None
    try:
        line = ui.stdout.readline()
        found = re.search(r"open (http://127\.0\.0\.1:(\d+))/\?token=(\S+)", line)
        assert found, line
        base, token = found.group(1), found.group(3)
        assert httpx.get(base + "/api/experiments", timeout=30).status_code == 401
        listed = httpx.get(base + "/api/experiments", timeout=30,
                           headers={"Authorization": f"Bearer {token}"})
        assert [e["name"] for e in listed.json()] == ["far"]
        assert (h.state / "ui.sock").exists()  # the login node serves a private socket only
    finally:
        ui.send_signal(signal.SIGINT)
        ui.wait(timeout=30)
    # The login node's server ends with the laptop's command.
    deadline = time.monotonic() + 30
    while _serving(h.state) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _serving(h.state)


def _serving(state: Path) -> bool:
    for proc in Path("/proc").iterdir():
        try:
            line = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if b"--exit-on-eof" in line and str(state).encode() in environ:
            return True
    return False


CTRL_C_USER = "hpcdet-kc"  # sshd passes a "signal" request on only for a user not root
# The long command's length marks it as this test run's: another run's (a second checkout's
# tests, as the same user) must not count as still running.
LONG = 100_000 + os.getpid()


def test_ctrl_c_ends_the_command_on_the_login_node(laptop: tuple[Laptop, Hpcdet]) -> None:
    from tests.support import ensure_user

    lap, _ = laptop
    ensure_user(CTRL_C_USER)
    # No password ("*"), but not the "!" sshd reads as a locked account.
    subprocess.run(["usermod", "-p", "*", CTRL_C_USER], check=True)
    config = Path(lap.env["HOME"]) / ".ssh" / "config"
    login = config.read_text()
    config.write_text(login + login.replace("Host login", "Host other").replace(
        f"User {pwd.getpwuid(os.getuid()).pw_name}", f"User {CTRL_C_USER}"))
    # Not hpcdet's command here: what is asked is that a long one ends.
    script = ("import sys\nfrom hpcdet.remote.session import RemoteSession\n"
              "from hpcdet.remote.profiles import Cluster\n"
              "s = RemoteSession(Cluster('o', 'other', '/bin/echo hpcdet "
              f"{__import__('hpcdet').__version__}'))\n"
              f"sys.exit(s.execute('echo started; exec sleep {LONG}', b''))\n")
    cli = subprocess.Popen([sys.executable, "-c", script], env=lap.env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           preexec_fn=interruptible)
    assert cli.stdout is not None
    assert cli.stdout.readline() == "started\n", cli.stderr.read() if cli.stderr else ""
    uid = pwd.getpwnam(CTRL_C_USER).pw_uid
    deadline = time.monotonic() + 20  # "started" comes before the shell's exec of sleep
    while not _sleeping(uid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _sleeping(uid)
    cli.send_signal(signal.SIGINT)
    cli.wait(timeout=30)
    deadline = time.monotonic() + 20
    while _sleeping(uid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _sleeping(uid)


def _sleeping(uid: int) -> bool:
    for proc in Path("/proc").iterdir():
        try:
            if proc.stat().st_uid == uid and f"sleep\x00{LONG}".encode() in (
                    proc / "cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def test_a_login_node_reached_only_through_a_bastion(local_hpcdet: Hpcdet,
                                                    tmp_path: Path) -> None:
    h = local_hpcdet
    with behind_a_bastion(h, tmp_path) as (lap, login_ns):
        direct = lap.run("-c", "direct", "e", "list")
        assert direct.returncode == 1 and "Traceback" not in direct.stderr
        assert "direct" in direct.stderr, direct.stderr  # this machine has no route there
        ctx = code_context(tmp_path / "laptop-files")
        created = lap.run("-c", "x", "e", "create", str(ctx.parent / "const.yaml"), str(ctx))
        assert created.returncode == 0, created.stderr
        assert created.stdout.splitlines()[-1] == "Created experiment 1"
        waited = lap.run("-c", "x", "e", "wait", "1")
        assert waited.returncode == 0, waited.stderr
        listed = lap.run("-c", "x", "e", "list")
        assert listed.stdout == h.run("e", "list").stdout and "COMPLETED" in listed.stdout
        logs = lap.run("-c", "x", "t", "logs", "1")
        assert "width 4" in logs.stdout
        # The login node's command started the daemon there, in the login node's namespace.
        daemon = json.loads((h.state / "daemon.json").read_text())["pid"]
        assert (os.stat(f"/proc/{daemon}/ns/net").st_ino
                == os.stat(f"/run/netns/{login_ns}").st_ino)
