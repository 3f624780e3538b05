"""`exec [exec options...] IMAGE COMMAND [ARGS...]`.

Flags (apptainer-exec(1)): -e/--cleanenv, -c/--contain, -B/--bind (repeatable), --env
(repeatable, pflag stringToString), --pwd, --nv, --rocm, --no-home, --no-eval, -H/--home
SRC[:DEST], --no-mount LIST (home, cwd, tmp).  Parsing stops at IMAGE.

Measured, Apptainer 1.4.5 on Debian, 2026-11-28 (as root and as an unprivileged user, with
`--cleanenv`, without `--contain`):
- `--home SRC:DEST` binds SRC at DEST, sets HOME=DEST, and DEST is the working directory when
  the host's is not in the container; `--home SRC` alone means DEST=SRC; DEST must be absolute
  (`container creation failed: failed to add SRC as session directory: path D is not an
  absolute path`).  With `--contain` too, the home is still SRC.
- `--no-mount home` mounts no home at all: a `--home X:/d` then only sets HOME=/d, and /d does
  not exist.  `--no-mount cwd`: the host's working directory is not bound (it is by default);
  `--no-mount tmp`: /tmp and /var/tmp are the image's, read-only like the rest of it.  An
  unknown word: `WARNING: Ignoring unknown mount type 'foo'`, and the run goes on.
- Without `--contain` the host's /dev (and /dev/shm) is the container's.
- `--nv`/`--rocm` on a host without a GPU print nothing.
- Order of messages: the image check (sif.py), then the environment's (environment.py), then,
  for an unprivileged user, two INFO lines (fuse2fs, gocryptfs), then the bind sources
  (binds.py), then the working directory and the command (stage2.py).

The view needs root and `unshare --mount`; without them the double hides nothing, says so in one
warning line, and runs the command on the host with the container environment (binds are then
only checked, not mounted).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from . import binds as binds_mod
from . import environment, sif, stage2
from .cli import Command, Flag, Parsed
from .messages import Fatal, info, warning
from .tools import Tool

NOT_ROOT = "hpcdet's apptainer double: not root, host paths are not hidden"
ENTRY = Path(__file__).with_name("__main__.py")
NO_MOUNT_WORDS = frozenset({"home", "tmp", "cwd"})
REAL_NO_MOUNT_WORDS = frozenset({"proc", "sys", "dev", "devpts", "hostfs", "bind-paths"})
# Printed by every SIF run of an unprivileged user (measured, Debian's 1.4.5 without fuse2fs
# and gocryptfs).
UNPRIVILEGED_INFO = ("fuse2fs not found, will not be able to mount EXT3 filesystems",
                     "gocryptfs not found, will not be able to use gocryptfs")

COMMAND = Command(
    name="exec",
    use="exec [exec options...] <container> <command>",
    flags=(
        Flag("bind", "B", "strings", "a user-bind path specification.  spec has the format "
             "src[:dest[:opts]], where src and dest are outside and inside paths.  If dest is "
             "not given, it is set equal to src.  Mount options ('opts') may be specified as "
             "'ro' (read-only) or 'rw' (read/write, which is the default). Multiple bind paths "
             "can be given by a comma separated list."),
        Flag("cleanenv", "e", usage="clean environment before running container"),
        Flag("contain", "c", usage="use minimal /dev and empty other directories (e.g. /tmp "
             "and $HOME) instead of sharing filesystems from your host"),
        Flag("env", "", "stringToString", "pass environment variable to contained process "
             "(default [])", check=environment.check_env_flag),
        Flag("home", "H", "string", "a home directory specification.  spec can either be a "
             "src path or src:dest pair.  src is the source path of the home directory outside "
             "the container and dest overrides the home directory within the container."),
        Flag("no-home", usage="do NOT mount users home directory if /home is not the current "
             "working directory"),
        Flag("no-mount", "", "strings", "disable one or more 'mount xxx' options set in "
             "apptainer.conf, specify absolute destination path to disable a bind path entry, "
             "or 'bind-paths' to disable all bind path entries."),
        Flag("no-eval", usage="do not shell evaluate env vars or OCI container CMD/ENTRYPOINT/"
             "ARGS"),
        Flag("nv", usage="enable Nvidia support"),
        Flag("pwd", "", "string", "initial working directory for payload process inside the "
             "container"),
        Flag("rocm", usage="enable experimental Rocm support"),
    ),
    min_args=2,
)


def describe(parsed: Parsed) -> dict[str, object]:
    return {"image": parsed.args[0], "command": parsed.args[1:]}


def run(tool: Tool, parsed: Parsed, environ: Mapping[str, str]) -> int:
    image_path = os.path.abspath(_image_path(parsed.args[0]))
    image = sif.read(image_path)
    sif.check_content(image_path, image)
    binds = binds_mod.parse(parsed.every("bind"))
    no_mount = _no_mount(parsed)
    home_src, home = _home(parsed.last("home"))
    home_mode = _home_mode(parsed, no_mount, home_src is not None)
    request = environment.Request(
        cleanenv=parsed.is_set("cleanenv"),
        image_env=image.env,
        env_flag=_env_flag(parsed),
        image_path=image_path,
        home=home,
        binds=tuple(b.target for b in binds),
        no_eval=parsed.is_set("no-eval"),
    )
    env = environment.container_env(tool, environ, request)
    if os.geteuid() != 0:
        for line in UNPRIVILEGED_INFO:
            info(line)
    binds_mod.check_sources(binds)
    contain = parsed.is_set("contain")
    cwd = None if contain or "cwd" in no_mount else _host_cwd()
    plan: dict[str, object] = {
        "command": parsed.args[1:],
        "env": env,
        "pwd": parsed.last("pwd"),
        "cwd": None if contain else _host_cwd(),
        "mount_cwd": cwd,
        "home": home,
        "home_source": home_src or home,
        "home_mode": home_mode,
        "contain": contain,
        "tmp": "none" if "tmp" in no_mount and not contain else (
            "empty" if contain else "host"),
        "content": list(image.content),
        "binds": [{"source": b.source, "target": b.target, "read_only": b.read_only}
                  for b in binds],
    }
    unshare = _unshare(environ)
    if unshare:
        _enter_namespace(unshare, plan)
    warning(NOT_ROOT)
    stage2.enter(plan)
    return 0  # not reached: enter() execs or raises


def _image_path(arg: str) -> str:
    if "://" in arg:
        raise Fatal(f"hpcdet's apptainer double only runs pulled images (SIF files), not {arg}; "
                    "pull it first")
    return arg


def _no_mount(parsed: Parsed) -> frozenset[str]:
    """--no-mount's words (a comma list, repeatable); an unknown one is warned about and
    ignored (measured: `WARNING: Ignoring unknown mount type 'foo'`, exit 0)."""
    words = {w for value in parsed.every("no-mount") for w in value.split(",") if w}
    for word in sorted(words - NO_MOUNT_WORDS):
        if word in REAL_NO_MOUNT_WORDS or word.startswith("/"):
            raise Fatal(f"hpcdet's apptainer double: --no-mount {word} is not supported "
                        "(only home, cwd and tmp)")
        warning(f"Ignoring unknown mount type '{word}'")
    return frozenset(words & NO_MOUNT_WORDS)


def _home(spec: str | None) -> tuple[str | None, str]:
    """(--home's source, or None; the container's home directory)."""
    own = pwd.getpwuid(os.geteuid()).pw_dir
    if not spec:
        return None, own
    source, _, dest = spec.partition(":")
    source = os.path.abspath(source)
    dest = dest or source
    if not dest.startswith("/"):
        raise Fatal(f"container creation failed: failed to add {source} as session directory: "
                    f"path {dest} is not an absolute path")
    return source, os.path.normpath(dest)


def _home_mode(parsed: Parsed, no_mount: frozenset[str], given: bool) -> str:
    if "home" in no_mount:
        return "none"  # measured: --home then only sets $HOME, its DEST is not made
    if given:
        return "bind"  # --home wins over --contain's empty home (measured)
    if parsed.is_set("contain"):
        return "empty"
    return "plain" if parsed.is_set("no-home") else "bind"


def _env_flag(parsed: Parsed) -> dict[str, str]:
    merged: dict[str, str] = {}
    for value in parsed.every("env"):
        merged.update(environment.parse_env_flag(value))
    return merged


def _host_cwd() -> str | None:
    try:
        return os.getcwd()
    except FileNotFoundError:
        return None


def _unshare(environ: Mapping[str, str]) -> str | None:
    """unshare's path when this process may create a private mount namespace."""
    if os.geteuid() != 0:
        return None
    unshare = shutil.which("unshare", path=environ.get("PATH", os.defpath))
    if unshare is None:
        return None
    probe = subprocess.run([unshare, "--mount", "--propagation", "private", "true"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return unshare if probe.returncode == 0 else None


def _enter_namespace(unshare: str, plan: Mapping[str, object]) -> None:
    python = sys.executable or "python3"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(unshare, [unshare, "--mount", "--propagation", "private",
                       python, "-I", str(ENTRY), "stage2", json.dumps(plan)])
