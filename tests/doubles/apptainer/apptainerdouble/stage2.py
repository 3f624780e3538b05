"""The container process: enter the view, choose the working directory, become the command.

With namespaces, `exec` replaces itself with `unshare --mount --propagation private python3 -I
apptainerdouble/__main__.py stage2 PLAN`, and this module (in the new namespace, still the same
process) builds the view, chroots into it and execs the command, so the process that was started
as `apptainer` ends up being the command: it gets the signals sent to `apptainer`, and its exit
status is the command's.  Without namespaces `exec` calls enter() directly.

Everything this module and fsview need is imported before the view hides the interpreter's own
files (a pyenv Python lives under /root).

Working directory (measured, Apptainer 1.4.5 on Debian, 2026-11-28): --pwd must exist ("failed
to set working directory: chdir X: no such file or directory", fatal); with --contain the home
directory; otherwise the host's current directory if the container has it, else the home
directory, else "/", with one warning naming the last directory tried ("WARNING: Error changing
the container working directory. Using '/root' instead: chdir /srv/m1: no such file or
directory"; with no home either: "Using '/' instead: chdir /d: ..."). The command is looked up
in the container's PATH; a missing one fails like apptainer 1.4.5's `exec` (exit 255) ("\"foo\":
executable file not found in $PATH"; with a slash: "stat /x: no such file or directory"). A file
without "#!" is run by /bin/sh, as apptainer retries on ENOEXEC."""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from . import fsview
from .binds import Bind
from .messages import FATAL_EXIT, Fatal, fatal, warning

SHELL = "/bin/sh"


def main(argv: Sequence[str]) -> int:
    """`__main__.py stage2 PLAN`, run by unshare inside the new mount namespace."""
    plan = json.loads(argv[1])
    try:
        root = fsview.build(_layout(plan))
        os.chroot(root)
        os.chdir("/")
        enter(plan)
    except Fatal as e:
        fatal(str(e))
    except OSError as e:
        fatal(f"container creation failed: {e}")
    return FATAL_EXIT


def enter(plan: Mapping[str, Any]) -> None:
    """chdir and exec the command; returns only by raising Fatal."""
    command = [str(word) for word in plan["command"]]
    env = {str(k): str(v) for k, v in plan["env"].items()}
    env["PWD"] = _choose_cwd(plan)
    path = _resolve(command[0], env.get("PATH", ""))
    _become(path, command, env)


def _layout(plan: Mapping[str, Any]) -> fsview.Layout:
    binds = tuple(Bind(str(b["source"]), str(b["target"]), bool(b["read_only"]))
                  for b in plan["binds"])
    cwd = plan.get("mount_cwd")
    return fsview.Layout(binds, str(plan["home"]), str(plan["home_mode"]),
                         bool(plan["contain"]), tuple(str(p) for p in plan["content"]),
                         home_source=str(plan.get("home_source") or ""),
                         tmp=str(plan.get("tmp", "host")), cwd=str(cwd) if cwd else None)


def _choose_cwd(plan: Mapping[str, Any]) -> str:
    pwd = plan.get("pwd")
    if pwd:
        try:
            os.chdir(str(pwd))
        except OSError as e:
            raise Fatal(f"failed to set working directory: chdir {pwd}: {_go(e)}") from None
        return os.getcwd()
    cwd, home = plan.get("cwd"), str(plan.get("home") or "/")
    if cwd is None:  # --contain: the home directory, silently
        return home if _chdir(home) else "/"
    failed = _chdir_error(str(cwd))
    if failed is None:
        return str(cwd)
    tried = str(cwd)
    for fallback in (home, "/"):
        if fallback != "/" and (error := _chdir_error(fallback)) is not None:
            failed, tried = error, fallback
            continue
        warning(f"Error changing the container working directory. Using '{fallback}' "
                f"instead: chdir {tried}: {failed}")
        _chdir(fallback)
        return fallback
    return "/"


def _chdir_error(path: str) -> str | None:
    try:
        os.chdir(path)
    except OSError as e:
        return _go(e)
    return None


def _chdir(path: str) -> bool:
    try:
        os.chdir(path)
    except OSError:
        return False
    return True


def _resolve(name: str, search_path: str) -> str:
    if "/" in name:
        if not os.path.exists(name):
            raise Fatal(f"stat {name}: no such file or directory")
        return name
    for directory in search_path.split(":"):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise Fatal(f'"{name}": executable file not found in $PATH')


def _become(path: str, command: list[str], env: dict[str, str]) -> None:
    # Python ignores SIGPIPE and SIGXFSZ, and ignored signals survive exec.
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(path, command, env)
    except OSError as e:
        if e.errno != errno.ENOEXEC:
            raise Fatal(f"exec {path} failed: {_go(e)}") from None
    try:
        os.execve(SHELL, [SHELL, path, *command[1:]], env)
    except OSError as e:
        raise Fatal(f"exec {path} failed: {_go(e)}") from None


def _go(error: OSError) -> str:
    """An errno as Go's syscall package words it (lower case)."""
    return (error.strerror or str(error)).lower()

