"""hpcdet from a laptop (issue 41): every command run on the login node through the keeper,
against a real OpenSSH server (a loopback one with a key: `bench.remote.start_sshd`) in front
of a real hpcdet and daemon on the local backend."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

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
def _laptop(h: Hpcdet, tmp_path: Path, totp: str | None = None) -> Iterator[Laptop]:
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


@pytest.fixture
def laptop(local_hpcdet: Hpcdet, tmp_path: Path) -> Iterator[tuple[Laptop, Hpcdet]]:
    with _laptop(local_hpcdet, tmp_path) as lap:
        yield lap, local_hpcdet


def test_a_second_factor_is_asked_once_for_many_commands(local_hpcdet: Hpcdet,
                                                        tmp_path: Path) -> None:
    # Debian's pam_oath asks a TOTP code after the key (publickey,keyboard-interactive); the
    # keeper's one transport carries every later command without asking again.
    secret = "3132333435363738393031323334353637383930"
    asked = tmp_path / "asked"
    askpass = tmp_path / "askpass"
    askpass.write_text(f'#!/bin/sh\necho "$1" >> {asked}\nexec oathtool --totp {secret}\n')
    askpass.chmod(0o700)
    with _laptop(local_hpcdet, tmp_path, totp=secret) as lap:
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


def _interruptible() -> None:
    """Ctrl-C's default back for a command these tests interrupt: a runner started in the
    background of a non-interactive shell (`bash .ci/run &`) ignores SIGINT, every process
    under it inherits that, and Python then leaves SIGINT ignored instead of raising
    KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _experiment(h: Hpcdet, tmp_path: Path, script: str) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "t.py").write_text(script)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("name: far\nentrypoint: python3 t.py\n"
                   "searcher: {name: single, metric: x, max_length: 1}\n")
    h.create(cfg, ctx)


def test_output_and_exit_code_are_the_login_nodes(laptop: tuple[Laptop, Hpcdet],
                                                  tmp_path: Path) -> None:
    lap, h = laptop
    _experiment(h, tmp_path, "print('hello from the trial')\n")
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
    _experiment(h, tmp_path, "import os, time\nprint('first line', flush=True)\n"
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
    _experiment(h, tmp_path, "print('x')\n")
    ui = subprocess.Popen([*CLI, "-c", "x", "ui"], env=lap.env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, preexec_fn=_interruptible)
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
                           preexec_fn=_interruptible)
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


def _context(root: Path) -> Path:
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


def _sent(stderr: str) -> int:
    """The bytes a create said it sent (0 for nothing)."""
    if re.search(r"^Sent nothing to x: its copy of the \d+ files is up to date$", stderr, re.M):
        return 0
    found = re.search(r"^Sent (\d+) bytes of \d+ of \d+ files to x$", stderr, re.M)
    assert found, stderr
    return int(found.group(1))


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_create_uploads_only_what_changed_and_a_resent_create_is_made_once(
        laptop: tuple[Laptop, Hpcdet], tmp_path: Path) -> None:
    lap, h = laptop
    ctx = _context(tmp_path / "laptop-files")
    cfg = ctx.parent / "const.yaml"
    first = lap.run("-c", "x", "e", "create", str(cfg), str(ctx), "--config", "name=first")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[-1] == "Created experiment 1"
    assert 0 < _sent(first.stderr) < 1000  # the code, not the ignored data
    copied = _tree(h.state / "runs" / "exp-1" / "context")
    assert sorted(copied) == ["pkg/model.py", "run.sh", "train.py"]
    assert copied["run.sh"] == ((ctx / "run.sh").read_bytes(), 0o700)  # private, still run
    assert h.run("e", "describe", "1", "--json").stdout.count('"first"') >= 1
    # Unchanged: nothing sent. One file changed: that file alone.
    again = lap.run("-c", "x", "e", "create", str(cfg), str(ctx))
    assert again.returncode == 0 and _sent(again.stderr) == 0, again.stderr
    (ctx / "pkg" / "model.py").write_text("WIDTH = 8\n")
    changed = lap.run("-c", "x", "e", "create", str(cfg), str(ctx))
    assert changed.returncode == 0 and _sent(changed.stderr) == len("WIDTH = 8\n")
    assert "of 1 of 4 files" in changed.stderr, changed.stderr
    # A config error names the laptop's file and sends nothing.
    (ctx.parent / "bad.yaml").write_text("entrypoint: [1\n")
    bad = lap.run("-c", "x", "e", "create", str(ctx.parent / "bad.yaml"), str(ctx))
    assert bad.returncode == 1 and str(ctx.parent / "bad.yaml") in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr and "Sent" not in bad.stderr
    # The same create sent twice (the laptop's connection dropped after the login node took
    # it): one experiment, both answered with it.
    from hpcdet.remote.upload import CreateArgs, make_manifest

    args = CreateArgs(("experiment", "create"), cfg, ctx, (), (), ())
    snap = tmp_path / "snap"
    shutil.copytree(ctx, snap, ignore=shutil.ignore_patterns("data", ".detignore"))
    manifest, _ = make_manifest(args, snap, "resent-1")
    answers = [subprocess.run([h.python, "-m", "hpcdet.cli.main", "relay", "create"],
                              env=h.env(), input=manifest.to_json().decode(),
                              capture_output=True, text=True, timeout=120, check=False)
               for _ in range(2)]
    assert all("Created experiment 4\n" in a.stdout for a in answers), answers[0].stderr
    assert "exp-5" not in os.listdir(h.state / "runs")


CUT_AT = 12_000_000


def test_an_upload_cut_midway_resumes_and_sends_each_byte_once(
        laptop: tuple[Laptop, Hpcdet], tmp_path: Path) -> None:
    lap, h = laptop
    ctx = _context(tmp_path / "laptop-files")
    weights = os.urandom(40_000_000)
    (ctx / "weights.bin").write_bytes(weights)
    create = subprocess.Popen([*CLI, "-c", "x", "e", "create", str(ctx.parent / "const.yaml"),
                               str(ctx)], env=lap.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    blobs = h.state / "uploads" / "blobs"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        parts = [p.stat().st_size for p in blobs.glob("*.part")] if blobs.exists() else []
        if any(n > CUT_AT for n in parts):
            break
        time.sleep(0.005)
    lap.cut()
    out, err = create.communicate(timeout=180)
    assert create.returncode == 0, err
    assert "Warning: the connection to x broke" in err and "going on where it stopped" in err
    assert CUT_AT < max(parts) < len(weights)  # it was cut midway
    # Sent from the start again, it would be at least CUT_AT more; what was in flight when the
    # connection broke (paramiko's pipelined writes: ~100 of 32 KiB) is sent again.
    assert len(weights) <= _sent(err) < len(weights) + CUT_AT, err
    assert out.splitlines()[-1] == "Created experiment 1"
    assert (h.state / "runs" / "exp-1" / "context" / "weights.bin").read_bytes() == weights
    assert sorted(os.listdir(h.state / "runs")) == ["bell", "exp-1"]


CHECKPOINT = '''
import os
import determined as det
with det.core.init() as core_context:
    core_context.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.5})
    with core_context.checkpoint.store_path({"steps_completed": 1}) as (path, _):
        (path / "weights").write_bytes(os.urandom(30_000_000))
        (path / "sub").mkdir()
        (path / "sub" / "step").write_text("1")
'''


def test_downloads_come_to_the_laptop_and_resume_after_a_cut(
        laptop: tuple[Laptop, Hpcdet], tmp_path: Path) -> None:
    lap, h = laptop
    _experiment(h, tmp_path, CHECKPOINT)
    h.run("e", "wait", "1")
    uuid = next(csv.DictReader(h.run("e", "lc", "1", "--csv").stdout.splitlines()))["UUID"]
    stored = h.state / "checkpoints" / uuid
    here = tmp_path / "on-laptop"
    # The login node's own output and exit code, the files here.
    far = lap.run("-c", "x", "c", "download", uuid, "-o", str(here / "a"))
    near = h.run("c", "download", uuid, "-o", str(tmp_path / "near"))
    assert far.returncode == 0, far.stderr
    assert far.stdout == near.stdout.replace(str(tmp_path / "near"), str(here / "a"))
    assert _tree(here / "a") == _tree(stored) and (here / "a").stat().st_mode & 0o777 == 0o700
    best = lap.run("-c", "x", "t", "download", "1", "--latest", "-o", str(here / "b"), "-q")
    assert best.stdout == f"{here / 'b'}\n", best.stderr
    assert (here / "b" / "sub" / "step").read_text() == "1"
    missing = lap.run("-c", "x", "c", "download", "no-such-uuid")
    assert (missing.returncode, missing.stderr) == (1, h.run(
        "c", "download", "no-such-uuid", check=False).stderr)
    # A full directory is refused here, as there.
    full = lap.run("-c", "x", "c", "download", uuid, "-o", str(here / "a"))
    assert full.returncode == 1 and "already holds files" in full.stderr, full.stderr
    # Cut midway: resumed from the bytes already here.
    cut = subprocess.Popen([*CLI, "-c", "x", "c", "download", uuid, "-o", str(here / "c")],
                           env=lap.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    partial = here / ".c.hpcdet-download" / "weights"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
            partial.exists() and partial.stat().st_size > 3_000_000):
        time.sleep(0.005)
    seen = partial.stat().st_size
    lap.cut()
    out, err = cut.communicate(timeout=120)
    assert cut.returncode == 0, err
    assert 3_000_000 < seen < 30_000_000 and "going on where it stopped" in err
    assert _tree(here / "c") == _tree(stored) and not partial.parent.exists()


SDK_SCRIPT = '''
import sys
from pathlib import Path
from hpcdet import client as hpcdet_client

hpcdet_client.as_determined()
from determined.experimental import client  # a script written for Determined's SDK

client.login(cluster="x")
exp = client.create_experiment(sys.argv[1], sys.argv[2])
print("created", exp.id, exp.name)
assert exp.wait(interval=0.2) == client.ExperimentState.COMPLETED, exp.state
trial = exp.list_trials()[0]
print("trial", trial.id, trial.state, trial.hparams)
print("metrics", [m.metrics for m in trial.iter_metrics("validation")])
best = exp.top_checkpoint()
print("step", Path(best.download(sys.argv[3]), "sub", "step").read_text())
exp.add_label("far")
exp.archive()
exp.reload()
print("archived", exp.archived, exp.labels)
print("listed", [e.id for e in client.list_experiments(labels=["far"])])
try:
    client.get_experiment(99)
except Exception as e:
    print("missing", type(e).__name__, e)
'''


def test_the_sdk_drives_the_cluster_from_the_laptop(laptop: tuple[Laptop, Hpcdet],
                                                    tmp_path: Path) -> None:
    lap, h = laptop
    ctx = tmp_path / "model"
    ctx.mkdir()
    (ctx / "t.py").write_text(CHECKPOINT)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("name: sdk\nentrypoint: python3 t.py\n"
                   "searcher: {name: single, metric: loss, max_length: 1}\n")
    script = tmp_path / "script.py"
    script.write_text(SDK_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(cfg), str(ctx),
                           str(tmp_path / "dl")], env=lap.env, capture_output=True, text=True,
                          timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "created 1 sdk" and lines[1].startswith("trial 1 COMPLETED")
    assert lines[2] == "metrics [{'loss': 0.5}]" and lines[3] == "step 1"
    assert lines[4] == "archived True ['far']" and lines[5] == "listed [1]"
    assert lines[6].startswith("missing NotFoundError ")
    assert (tmp_path / "dl" / "weights").stat().st_size == 30_000_000
    # It was the login node's daemon that did it.
    described = json.loads(h.run("e", "describe", "1", "--json").stdout)
    assert described["experiment"]["archived"] is True, described


def _ip(*args: str, netns: str | None = None) -> None:
    inside = ["ip", "netns", "exec", netns] if netns else []
    subprocess.run([*inside, "ip", *args], check=True, capture_output=True)


@contextlib.contextmanager
def _behind_a_bastion(h: Hpcdet, tmp_path: Path) -> Iterator[tuple[Laptop, str]]:
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
            _ip("netns", "add", ns)
            _ip("link", "set", "lo", "up", netns=ns)
        # laptop (here) <-> bastion: .1.x; bastion <-> login: .2.x; nothing forwards between.
        _ip("link", "add", f"{tag}h", "type", "veth", "peer", "name", f"{tag}b")
        _ip("link", "set", f"{tag}b", "netns", bastion_ns)
        _ip("addr", "add", f"{net}.1/30", "dev", f"{tag}h")
        _ip("link", "set", f"{tag}h", "up")
        _ip("addr", "add", f"{net}.2/30", "dev", f"{tag}b", netns=bastion_ns)
        _ip("link", "set", f"{tag}b", "up", netns=bastion_ns)
        _ip("link", "add", f"{tag}x", "type", "veth", "peer", "name", f"{tag}l",
            netns=bastion_ns)
        _ip("link", "set", f"{tag}l", "netns", login_ns, netns=bastion_ns)
        _ip("addr", "add", f"{net}.5/30", "dev", f"{tag}x", netns=bastion_ns)
        _ip("link", "set", f"{tag}x", "up", netns=bastion_ns)
        _ip("addr", "add", f"{net}.6/30", "dev", f"{tag}l", netns=login_ns)
        _ip("link", "set", f"{tag}l", "up", netns=login_ns)
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


def test_a_login_node_reached_only_through_a_bastion(local_hpcdet: Hpcdet,
                                                    tmp_path: Path) -> None:
    h = local_hpcdet
    with _behind_a_bastion(h, tmp_path) as (lap, login_ns):
        direct = lap.run("-c", "direct", "e", "list")
        assert direct.returncode == 1 and "Traceback" not in direct.stderr
        assert "direct" in direct.stderr, direct.stderr  # this machine has no route there
        ctx = _context(tmp_path / "laptop-files")
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
