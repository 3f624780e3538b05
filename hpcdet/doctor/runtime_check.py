"""Findings about the container runtime on this node: found, its version, where images are
converted and the temporary directories it will use."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from hpcdet.containers import parse_version, version_argvs
from hpcdet.doctor.findings import Finding, Status
from hpcdet.errors import SchedulerCommandError
from hpcdet.schedulers.runner import CommandRunner

# Below this, converting one CUDA image (several GB) may fill the disk.
LOW_SPACE_GB = 10.0
_TMP_VARIABLES = ("APPTAINER_TMPDIR", "SINGULARITY_TMPDIR", "APPTAINER_CACHEDIR",
                  "SINGULARITY_CACHEDIR", "TMPDIR")


def ask_version(name: str, runner: CommandRunner) -> tuple[str, str, str]:
    """Where ``name`` is on PATH here ("" for nowhere), the version it tells
    (``containers.version_argvs``, through the command runner; "" for none) and what failed
    on the way, said, never raised."""
    path = shutil.which(name)
    if path is None:
        return "", "", ""
    problems = []
    for cmd in version_argvs(name, path):
        try:
            result = runner.run(cmd, check=False)
        except SchedulerCommandError as e:
            problems.append(str(e))
            continue
        version = parse_version(name, result.stdout) if result.exit_code == 0 else None
        if version:
            return path, version, "; ".join(problems)
        said = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()
        problems.append(f"`{' '.join(cmd[1:])}` exited {result.exit_code}: {said[-1]}")
    return path, "", "; ".join(problems)


def runtime(name: str, chosen: bool, runner: CommandRunner) -> tuple[Finding, str]:
    """The runtime and its version; ``chosen``: the cluster config names it (missing: a
    failure, else a warning, as trials without an image need none). Also its path ("")."""
    path, version, problems = ask_version(name, runner)
    if not path:
        return Finding(
            "container runtime", Status.FAIL if chosen else Status.WARN,
            f"{name} not found on PATH" + ("" if chosen else " (the default runtime)"),
            f"install {name} or load its module, or set container_runtime: in cluster.yaml to"
            " one this site has; experiments without environment.image need none"), ""
    if version:
        return Finding("container runtime", Status.OK, f"{version} at {path}"), path
    return Finding("container runtime", Status.FAIL, f"{name} at {path} did not tell its "
                   f"version: {problems}",
                   f"run `{name} --version` here and fix what it says"), path


def image_dirs(cache: Path, env: Mapping[str, str] = os.environ) -> Finding:
    """Where hpcdet converts images (``cache``) and the runtime's temporary directories."""
    existing = next((p for p in (cache, *cache.parents) if p.exists()), Path("/"))
    free = shutil.disk_usage(existing).free / 1e9
    temps = [f"{v}={env[v]}" for v in _TMP_VARIABLES if env.get(v)]
    seen = (f"image cache {cache} ({free:.0f} GB free); temporary: "
            f"{', '.join(temps) or 'none set (/tmp)'}")
    if not os.access(existing, os.W_OK):
        return Finding("image cache", Status.FAIL, seen + f"; {existing} is not writable",
                       "set image_cache: in cluster.yaml to a directory of yours")
    if free < LOW_SPACE_GB:
        return Finding("image cache", Status.WARN, seen,
                       f"converting an image needs several GB: set image_cache: (and "
                       f"APPTAINER_TMPDIR) to a filesystem with more than {LOW_SPACE_GB:.0f} GB")
    return Finding("image cache", Status.OK, seen)


__all__ = ["ask_version", "image_dirs", "runtime"]
