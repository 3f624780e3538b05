"""`exec [exec options...] IMAGE COMMAND [ARGS...]`.

Flags (apptainer-exec(1)): -e/--cleanenv, -c/--contain, -B/--bind (repeatable), --env
(repeatable, pflag stringToString), --pwd, --nv, --rocm, --no-home.  Parsing stops at IMAGE.

Checks, in the real tool's order and words: the image and its content paths (sif.py), the GPU
flags (with no GPU on
the host apptainer warns "Could not find any nv files on this host!" / "... rocm files ..." and
carries on), the bind sources (binds.py).  Then the container environment (environment.py) and
the filesystem view (fsview.py, stage2.py).

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
from .messages import Fatal, warning
from .tools import Tool

NOT_ROOT = "hpcdet's apptainer double: not root, host paths are not hidden"
ENTRY = Path(__file__).with_name("__main__.py")

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
        Flag("no-home", usage="do NOT mount users home directory if /home is not the current "
             "working directory"),
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
    image_path = _image_path(parsed.args[0])
    image = sif.read(image_path)
    sif.check_content(image_path, image)
    _gpu_warnings(parsed, environ)
    binds = binds_mod.parse(parsed.every("bind"))
    binds_mod.check_sources(binds)
    home = pwd.getpwuid(os.geteuid()).pw_dir
    request = environment.Request(
        cleanenv=parsed.is_set("cleanenv"),
        image_env=image.env,
        env_flag=_env_flag(parsed),
        image_path=os.path.abspath(image_path),
        home=home,
        binds=tuple(b.spec for b in binds),
        no_eval=parsed.is_set("no-eval"),
    )
    plan: dict[str, object] = {
        "command": parsed.args[1:],
        "env": environment.container_env(tool, environ, request),
        "pwd": parsed.last("pwd"),
        "cwd": _host_cwd(),
        "home": home,
        "home_mode": _home_mode(parsed),
        "contain": parsed.is_set("contain"),
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


def _gpu_warnings(parsed: Parsed, environ: Mapping[str, str]) -> None:
    path = environ.get("PATH", os.defpath)
    if parsed.is_set("nv") and not shutil.which("nvidia-smi", path=path):
        warning("Could not find any nv files on this host!")
    if parsed.is_set("rocm") and not shutil.which("rocm-smi", path=path):
        warning("Could not find any rocm files on this host!")


def _env_flag(parsed: Parsed) -> dict[str, str]:
    merged: dict[str, str] = {}
    for value in parsed.every("env"):
        merged.update(environment.parse_env_flag(value))
    return merged


def _home_mode(parsed: Parsed) -> str:
    if parsed.is_set("contain"):
        return "empty"
    return "plain" if parsed.is_set("no-home") else "bind"


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
