"""Running the real `hpcdet` CLI against a private state directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcdet.paths import StatePaths
from hpcdet.protocol.process import lock_held

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "core_api"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@dataclass
class Hpcdet:
    """One user's hpcdet: a state directory, a cluster config and the CLI."""

    root: Path
    backend: str
    extra_env: dict[str, str] = field(default_factory=dict)
    # Another (unprivileged) user running the CLI through runuser, with a Python they can
    # read; the test process itself runs as root then.
    user: str | None = None
    python: str = sys.executable
    # --config overrides given to every `experiment create` (to run the tutorial in an image).
    create_overrides: list[str] = field(default_factory=list)
    # A command the CLI runs under (nsenter into another login node's namespaces).
    wrap: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "cluster.yaml").write_text(f"backend: {self.backend}\n")
        (self.root / "site.yaml").write_text("{}\n")
        if self.user is not None:
            shutil.chown(self.root, self.user, self.user)

    def mkdir(self, path: Path) -> Path:
        """A directory the user's jobs can write to."""
        path.mkdir(parents=True, exist_ok=True)
        if self.user is not None:
            shutil.chown(path, self.user, self.user)
        return path

    @property
    def state(self) -> Path:
        return self.root / "state"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            HPCDET_HOME=str(self.state),
            HPCDET_CLUSTER_CONFIG=str(self.root / "cluster.yaml"),
            HPCDET_SITE_CONFIG=str(self.root / "site.yaml"),
        )
        env.update(self.extra_env)
        # The python3 that experiments created here run their trials with is this user's
        # interpreter, never whatever a shell put first on PATH: a test whose startup hook
        # deletes its trial's site-packages once emptied the machine's own Python that way.
        env["PATH"] = f"{Path(self.python).parent}{os.pathsep}{env['PATH']}"
        return env

    def run(
        self, *args: str, check: bool = True, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        if args[:2] in (("experiment", "create"), ("e", "create")):
            args = (*args, *(a for o in self.create_overrides for a in ("--config", o)))
        command = [*self.wrap, self.python, "-m", "hpcdet.cli.main", *args]
        env = self.env()
        if self.user is not None:
            own = {k: v for k, v in env.items() if k.startswith("HPCDET_")}
            own.update(PATH="/usr/local/bin:/usr/bin:/bin", HOME=str(self.root),
                       USER=self.user, LOGNAME=self.user)
            command = ["runuser", "-u", self.user, "--", "env", "-i",
                       *(f"{k}={v}" for k, v in own.items()), *command]
        p = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=timeout,
            cwd=self.root if self.user is not None else None,
        )
        if check and p.returncode != 0:
            raise AssertionError(
                f"hpcdet {' '.join(args)} exited {p.returncode}\nstdout:\n{p.stdout}\n"
                f"stderr:\n{p.stderr}"
            )
        return p

    def create(self, config: Path | str, context: Path, *extra: str) -> int:
        out = self.run("experiment", "create", str(config), str(context), *extra).stdout
        m = re.search(r"Created experiment (\d+)\n", out)
        assert m, out
        return int(m.group(1))

    def describe(self, exp_id: int) -> dict[str, Any]:
        return json.loads(self.run("experiment", "describe", str(exp_id), "--json").stdout)

    def metrics(self, trial_id: int) -> list[dict[str, Any]]:
        return json.loads(self.run("trial", "metrics", str(trial_id), "--json").stdout)

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}\n{self.diagnosis()}")

    def diagnosis(self) -> str:
        """What a person debugging a stuck test wants first: daemon, runs, queue, journal."""
        status = self.daemon_status()
        alive = bool(status) and Path(f"/proc/{status['pid']}").exists()
        parts = [f"daemon pid {status.get('pid')} alive={alive}, last tick "
                 f"{time.time() - status.get('last_tick', 0):.0f} s ago"]
        for journal in sorted(self.state.glob("runs/exp-*/journal.jsonl")):
            exp_id = journal.parent.name[4:]
            p = self.run("experiment", "describe", exp_id, "--json", check=False)
            if p.returncode == 0:
                d = json.loads(p.stdout)
                parts.append(f"experiment {exp_id}: {d['experiment']['state']}")
                parts += [f"  trial {t['id']} {t['state']} steps {t['steps_completed']} "
                          f"{t['end_reason']}" for t in d["trials"]]
                parts += [f"  run {r['trial_id']}.{r['run_id']} {r['state']} job {r['job_id']} "
                          f"{r['outcome']}" for r in d["runs"]]
            tail = journal.read_text().splitlines()[-15:]
            parts.append("journal tail:\n" + "\n".join(line[:300] for line in tail))
        if self.backend == "slurm":
            q = subprocess.run(["squeue", "--array", "-o", "%i %u %T %r %j %Z"],
                               capture_output=True, text=True, timeout=30)
            parts.append("squeue:\n" + "\n".join(
                line for line in q.stdout.splitlines() if str(self.state) in line))
        parts.append("daemon log tail:\n" + self.daemon_log()[-3000:])
        return "\n".join(parts)

    def wait_state(self, exp_id: int, states: set[str], timeout: float = 180) -> dict[str, Any]:
        self.wait_for(f"experiment {exp_id} in {states}",
                      lambda: self.describe(exp_id)["experiment"]["state"] in states, timeout)
        return self.describe(exp_id)

    def daemon_status(self) -> dict[str, Any]:
        for path in self.state.rglob("status.json"):
            return json.loads(path.read_text())
        return {}

    def kill_daemon(self) -> None:
        """SIGKILL the daemon, then start another, as a user whose daemon was killed does.
        The kill lands when the process next leaves the kernel (a loaded disk can hold it in
        an fsync for seconds); until then it holds the daemon lock and ``daemon start`` rightly
        finds it running. So the start waits for the lock to be free, and this for the new
        daemon's status."""
        pid = int(self.daemon_status()["pid"])
        os.kill(pid, signal.SIGKILL)
        self.wait_for(f"the killed daemon (pid {pid}) to let go of its lock",
                      lambda: not lock_held(StatePaths(self.state)), timeout=60)
        self.run("daemon", "start")
        self.wait_for("the new daemon's status", lambda: self.daemon_status().get("pid") not in
                      (None, pid), timeout=60)

    def daemon_log(self) -> str:
        for path in self.state.rglob("daemon.log"):
            return path.read_text(errors="replace")
        return ""

    def stop(self) -> None:
        self.run("daemon", "stop", check=False, timeout=60)


def ensure_user(name: str) -> None:
    """An unprivileged local account (needs root), created if missing."""
    if subprocess.run(["id", name], capture_output=True, check=False).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name],
                       check=True, capture_output=True)


def python_for_users(base: Path) -> str | None:
    """A Python with hpcdet installed that unprivileged users can run, built in ``base``
    (world-readable): the test environment may live where they cannot read (root's home), so
    hpcdet is installed from this checkout into a venv of Debian's python3. None (and the
    reason on stderr) when that fails."""
    base.chmod(0o755)
    venv = base / "venv"
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        print("no /usr/bin/python3: install python3 and python3-venv", file=sys.stderr)
        return None
    import fcntl

    for cmd in ([python, "-m", "venv", str(venv)],
                [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(REPO)]):
        # pip builds in the checkout (build/, *.egg-info): two test workers at once collide.
        with open(Path(tempfile.gettempdir()) / "hpcdet-tests-pip.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                                  check=False)
        if done.returncode != 0:
            print(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}", file=sys.stderr)
            return None
    return str(venv / "bin" / "python")


def copy_examples(dest: Path) -> Path:
    shutil.copytree(EXAMPLES, dest)
    return dest


def slurm_jobs_under(path: Path) -> set[str]:
    """The current user's Slurm jobs whose working directory is in ``path``; an array counts
    once, by its array job id (%F; %A would give each started task its own id)."""
    listed = subprocess.run(["squeue", "--me", "--noheader", "-o", "%F|%Z"],
                            capture_output=True, text=True, check=False, timeout=60)
    return {job for job, _, workdir in (line.partition("|") for line in listed.stdout.splitlines())
            if workdir.startswith(str(path))}


APPTAINER_DOUBLE = REPO / "tests" / "doubles" / "apptainer"
# The double shows a container only the OS directories of the host (and what is bound), so
# what hpcdet binds must live outside /tmp, which each container has of its own.
CONTAINER_TESTS_ROOT = Path("/srv/hpcdet-tests")
# What the double's image "python:3.11" holds: Debian's /usr/bin/python3 (no torch, no hpcdet).
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
IMAGE_PYTHONPATH = "/usr/lib/image-python"


@dataclass
class Images:
    """A registry for the Apptainer double and the variables that point it there."""

    root: Path

    def __post_init__(self) -> None:
        self.registry.mkdir(parents=True, exist_ok=True)
        (self.registry / "library_python_3.11.json").write_text(
            json.dumps({"env": {"PATH": IMAGE_PATH, "PYTHONPATH": IMAGE_PYTHONPATH},
                        "labels": {"made.by": "hpcdet tests"}}))

    @property
    def registry(self) -> Path:
        return self.root / "registry"

    @property
    def log(self) -> Path:
        return self.root / "apptainer-calls.jsonl"

    def env(self, on_path: bool = True) -> dict[str, str]:
        path = os.environ["PATH"]
        return {"PATH": f"{APPTAINER_DOUBLE / 'bin'}{os.pathsep}{path}" if on_path else path,
                "HPCDET_APPTAINER_DOUBLE_REGISTRY": str(self.registry),
                "HPCDET_APPTAINER_DOUBLE_LOG": str(self.log)}

    def calls(self, subcommand: str) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        calls = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [c for c in calls if c.get("subcommand") == subcommand]


def require_modules(*names: str) -> None:
    """Optional Python modules a test needs (scripts/test.sh installs them): a missing one
    fails the test under ``CI=true``, else skips it."""
    import importlib.util

    import pytest

    missing = [n for n in names if importlib.util.find_spec(n) is None]
    if not missing:
        return
    reason = f"needs the Python module(s) {', '.join(missing)} (scripts/test.sh installs them)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def require_root(reason: str) -> None:
    """A test that makes other users' files or accounts: it fails without root under
    ``CI=true`` (CI runs the tests as root), else skips."""
    import pytest

    if os.geteuid() == 0:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI runs the tests as root", pytrace=False)
    pytest.skip(reason)


CHROMIUM = "/usr/bin/chromium"  # Debian's, which scripts/test.sh installs
# Chromium's own network traffic (updates, sync) has nowhere to go on these machines.
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--disable-quic"]


@contextmanager
def ui_server(h: Hpcdet) -> Iterator[tuple[str, str]]:
    """`hpcdet ui --port 0` of ``h``, serving: (its base URL, its token)."""
    proc = subprocess.Popen([h.python, "-m", "hpcdet.cli.main", "ui", "--port", "0"],
                            env=h.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    assert proc.stdout is not None
    said = ""
    while "then open:" not in said and proc.poll() is None:
        said += proc.stdout.readline()
    port, secret = re.search(r"127\.0\.0\.1:(\d+)", said), re.search(r"token=(\S+)", said)
    assert port and secret, said
    try:
        yield f"http://127.0.0.1:{port.group(1)}", secret.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
