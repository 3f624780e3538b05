"""Starting, finding and stopping the per-user daemon.

One daemon per user and state directory: it holds an exclusive lock on a file on local disk
(one daemon per host) and the state directory's lease (``lease``: one daemon, whichever host),
and records its host, pid and heartbeat in ``daemon.json`` on the shared filesystem, so that a
CLI on another login node can reach it through the request files, or name where it runs.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import IO, Any

from hpcdet import __version__
from hpcdet.errors import DaemonError
from hpcdet.paths import StatePaths, hostname
from hpcdet.private import hpcdet_command, open_private
from hpcdet.processes import pid_alive
from hpcdet.protocol.lease import Holder
from hpcdet.rundir.atomic import read_json

# In the daemon's local directory: what ``hpcdet daemon status`` shows of a daemon on this host.
STATUS_FILE = "status.json"


@dataclass
class DaemonInfo:
    record: dict[str, Any]
    status: dict[str, Any]
    alive: bool
    here: bool

    @property
    def holder(self) -> Holder | None:
        return Holder.of(self.record)

    def unreachable(self) -> str | None:
        """What the daemon said last of a scheduler that does not answer it, or None."""
        if not self.alive:
            return None
        got = (self.status if self.here else self.record).get("scheduler_unreachable")
        if not isinstance(got, dict):
            return None
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(got.get("since", 0))))
        return (f"the scheduler has not answered since {since} ({got.get('polls')} polls in a "
                f"row; no trial is failed for it, and submissions wait): {got.get('error')}")

    def silent(self, now: float | None = None) -> str | None:
        """Why a daemon alive on another host may not answer: it has missed two heartbeats
        (its host may have died with it), or None. Its lease has not ended yet, so no daemon
        may start here before it does."""
        holder = self.holder
        if self.here or not self.alive or holder is None:
            return None
        now = time.time() if now is None else now
        if now - holder.heartbeat < holder.lease / 2:
            return None
        return (f"the daemon for this state directory runs on {holder.where()}, and has not "
                f"been heard from for {now - holder.heartbeat:.0f} s: its host may be down. "
                f"Its lease ends at {time.strftime('%H:%M:%S', time.localtime(holder.expires()))}"
                f"; after that, any hpcdet command (or `hpcdet daemon ensure`) starts a daemon "
                f"here, which takes over its experiments")

    def other_version(self) -> str | None:
        """How the running daemon's hpcdet differs from this process's, or None if it is the
        same (or none runs). After ``pip install -U hpcdet`` the daemon started before runs
        on until it is restarted: requests this CLI makes may be new to it."""
        if not self.alive:
            return None
        theirs = self.record.get("version")
        if theirs == __version__:
            return None
        started_by = f"hpcdet {theirs}" if theirs else "an earlier hpcdet"
        return (f"the daemon (pid {self.record.get('pid')}) was started by {started_by}, and "
                f"this is hpcdet {__version__}: `hpcdet daemon stop`, then `hpcdet daemon "
                "start`, runs this version's daemon (jobs keep running meanwhile)")


def acquire_lock(paths: StatePaths) -> IO[str] | None:
    """The daemon lock, or None when another daemon holds it."""
    lock_path = paths.lock()
    paths.prepare_local()
    f = os.fdopen(open_private(lock_path), "r+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    return f


def lock_held(paths: StatePaths) -> bool:
    """Whether a daemon holds the lock; a killed daemon's lock is free even while it is a zombie."""
    if not paths.lock().exists():
        return False
    lock = acquire_lock(paths)
    if lock is None:
        return True
    lock.close()
    return False


def info(paths: StatePaths) -> DaemonInfo:
    record = read_json(paths.daemon_record) or {}
    here = record.get("host") == hostname() if record else True
    status = _status(paths) if here else {}
    if not record:
        alive = False
    elif here:
        alive = bool(record.get("running")) and lock_held(paths)
    else:
        holder = Holder.of(record)
        alive = holder is not None and holder.live(time.time())
    return DaemonInfo(record, status, alive, here)


def _status(paths: StatePaths) -> dict[str, Any]:
    """What the daemon last wrote of itself; nothing if the file is torn (it is not forced to
    disk, so a machine's crash can leave it empty: the next start writes it again)."""
    try:
        status = read_json(paths.local_dir() / STATUS_FILE)
    except ValueError:
        return {}
    return status if isinstance(status, dict) else {}


def start(paths: StatePaths, timeout: float = 20.0) -> DaemonInfo:
    """Start the daemon unless one runs; returns once it has served its first tick.

    A daemon can die after it has taken the lock and written its record (while it catches up
    with the run tree and the scheduler), so neither proves a start: only a tick of the new
    process does, or, when catching up outlasts ``timeout``, that process still alive with the
    lock held.
    """
    current = info(paths)
    if current.alive:
        if not current.here:
            raise DaemonError(
                f"the daemon for {paths.root} runs on host {current.record['host']} "
                f"(pid {current.record['pid']}); run hpcdet there, or stop it there first"
            )
        return current
    local = paths.prepare_local()
    log = os.fdopen(open_private(local / "daemon.log", os.O_WRONLY | os.O_APPEND), "ab")
    started_at = log.tell()  # the log is kept across starts: show this start's words only
    env = dict(os.environ, HPCDET_HOME=str(paths.root))
    proc = subprocess.Popen(
        hpcdet_command("hpcdet.daemon"), stdin=subprocess.DEVNULL, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=local,
    )
    deadline = time.monotonic() + timeout
    while True:
        current = info(paths)
        ours = current.alive and current.record.get("pid") == proc.pid
        if proc.poll() is not None:
            current = info(paths)
            if current.alive and current.record.get("pid") != proc.pid:
                return current  # another start won the race; that daemon serves
            with open(local / "daemon.log", "rb") as f:
                f.seek(started_at)
                tail = f.read().decode(errors="replace")[-2000:]
            raise DaemonError(f"the daemon exited at start (code {proc.returncode}):\n{tail}")
        if ours and _ticked(current, proc.pid):
            return current
        if time.monotonic() > deadline:
            if ours:
                return current  # still catching up with a large run tree, but it serves
            raise DaemonError(f"the daemon did not start within {timeout:.0f} s; see "
                              f"{local / 'daemon.log'}")
        time.sleep(0.1)


def _ticked(current: DaemonInfo, pid: int) -> bool:
    return current.status.get("pid") == pid and bool(current.status.get("last_tick"))


def stop(paths: StatePaths, timeout: float = 30.0) -> bool:
    """Stop the daemon on this host by its pid; returns whether one was running."""
    current = info(paths)
    if not current.alive:
        return False
    if not current.here:
        raise DaemonError(f"the daemon runs on host {current.record['host']}; stop it there")
    pid = int(current.record["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    # An exited daemon frees its lock at once; its pid lingers while the parent (a CLI that
    # started it in this process) has not reaped it.
    while time.monotonic() < deadline and pid_alive(pid) and lock_held(paths):
        time.sleep(0.1)
    return True
