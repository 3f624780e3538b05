"""Processes: liveness checks, process-group signals, detached spawning."""

from __future__ import annotations

import os
import signal

# ---------------------------------------------------------------------------------------------
# Processes.
# ---------------------------------------------------------------------------------------------


def proc_start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            data = f.read()
    except OSError:
        return None
    return data.rsplit(")", 1)[1].split()[19]


def pid_alive(pid: int | None, start: str | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now_start = proc_start_time(pid)
    if now_start is None:
        return True  # no /proc: trust kill(0)
    if start is not None and now_start != start:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except OSError:
        return False
    return True


def killpg(pgid: int | None, sig: int) -> bool:
    if not pgid:
        return False
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def spawn_detached(argv: list[str], env: dict, log_path: str) -> int:
    """Double-fork a detached process in its own session (so no zombie is left to the caller)
    and return its pid."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(r)
            os.setsid()
            pid2 = os.fork()
            if pid2:
                os.write(w, str(pid2).encode())
                os._exit(0)
            os.close(w)
            fd0 = os.open(os.devnull, os.O_RDONLY)
            fd1 = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(fd0, 0)
            os.dup2(fd1, 1)
            os.dup2(fd1, 2)
            # The runner installs its own handlers once Python has started; until then a qdel's
            # SIGUSR1 (or a stray SIGTERM/SIGHUP) would kill it with the default action, and
            # the job would end "lost". Ignored dispositions survive exec; the store's
            # kill_requested tells the runner of a qdel it did not hear.
            for sig in (signal.SIGUSR1, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)
            os.execve(argv[0], argv, env)
        except BaseException:  # noqa: BLE001 - nothing sane to do in a forked child
            os._exit(127)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 64)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return int(data) if data else 0
