"""The trial side of hpcdet as a read-only tree that the trial's own Python imports.

Trials run in the user's Python environment or in an image, never in hpcdet's: what a startup
hook installs or deletes must not reach the packages the daemon and the CLI run on. The trial
still needs the Core API, the launchers and ``import determined``, so those (standard library
code only, with the few shared modules they import) are copied once per hpcdet version into::

    <state>/trialside/<digest>/hpcdet/...       core, launch, rundir and their shared modules
    <state>/trialside/<digest>/determined/...   the shim

The tree is on the shared filesystem (compute nodes read it), named by the digest of its
content (an upgrade makes a new tree while running jobs keep theirs), and read-only: its files
and directories lose their write bits, so a hook's ``rm -rf`` or a stray write fails there.
"""

from __future__ import annotations

import compileall
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from hpcdet.errors import ConfigError
from hpcdet.private import current_umask, private_dir
from hpcdet.rundir.spec import CLUSTER_INFO_ENV

OLDEST_PYTHON = (3, 9)

# Module -> where it goes in the tree. The import-linter contract "trial-side-stdlib" keeps
# them standard-library only; tests/unit/test_trialside.py imports every module of the built
# tree with no site-packages at all.
PACKAGES = {
    "hpcdet.core": "hpcdet/core",
    "hpcdet.launch": "hpcdet/launch",
    "hpcdet.rundir": "hpcdet/rundir",
    "hpcdet.pytorch": "hpcdet/pytorch",
    "hpcdet.shim.determined": "determined",
}
MODULES = {
    "hpcdet": "hpcdet/__init__.py",
    "hpcdet.errors": "hpcdet/errors.py",
    "hpcdet.private": "hpcdet/private.py",
    "hpcdet.node_env": "hpcdet/node_env.py",
    "hpcdet.containers": "hpcdet/containers.py",
    "hpcdet.images": "hpcdet/images.py",
}


def _package_files(name: str) -> Iterator[tuple[Path, str]]:
    spec = importlib.util.find_spec(name)
    # An editable install maps hpcdet.launch to launchers/ through an import hook: the
    # package's own search location is the one place that knows where its files are.
    assert spec is not None and spec.submodule_search_locations, name
    root = Path(next(iter(spec.submodule_search_locations)))
    for path in sorted(root.rglob("*.py")):
        yield path, path.relative_to(root).as_posix()


def sources() -> list[tuple[Path, str]]:
    """``(file, path in the tree)`` of every file of the trial side."""
    found: list[tuple[Path, str]] = []
    for package, target in PACKAGES.items():
        found += [(path, f"{target}/{rel}") for path, rel in _package_files(package)]
    for module, target in MODULES.items():
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin, module
        found.append((Path(spec.origin), target))
    return found


def digest(files: list[tuple[Path, str]]) -> str:
    h = hashlib.sha256()
    for path, rel in sorted(files, key=lambda f: f[1]):
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@functools.cache
def _this_version() -> tuple[tuple[tuple[Path, str], ...], str]:
    """The trial side's files and their digest: read once, the code does not change while
    hpcdet runs."""
    files = sources()
    return tuple(files), digest(files)


def ensure(root: Path) -> Path:
    """The tree of this hpcdet under ``root`` (``<state>/trialside``), built if missing."""
    files, name = _this_version()
    tree = root / name
    if tree.is_dir():
        return tree
    private_dir(root, None)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        for path, rel in files:
            target = building / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        compileall.compile_dir(building, quiet=1, workers=1)
        _read_only(building)
        try:
            os.rename(building, tree)
        except OSError:
            if not tree.is_dir():  # not another daemon's build of the same tree
                raise
    finally:
        if building.exists():
            remove(building)
    return tree


def off_cluster_environment(tree: Path, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a Determined script run off the cluster: ``tree`` (see :func:`ensure`)
    first on ``PYTHONPATH``, before the entries ``env`` had, and no cluster info, so that
    ``import determined`` gives hpcdet's Core API and ``core.init()`` its off-cluster dummies.
    """
    out = {k: v for k, v in env.items() if k != CLUSTER_INFO_ENV}
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), env.get("PYTHONPATH", "")) if p)
    return out


def _read_only(tree: Path) -> None:
    keep = ~current_umask()
    for dirpath, dirnames, filenames in os.walk(tree):
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o444 & keep)
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o555 & keep)
    os.chmod(tree, 0o555 & keep)


def remove(tree: Path) -> None:
    """Delete a tree (its directories are read-only, so ``rmtree`` alone cannot)."""
    for dirpath, _dirnames, _filenames in os.walk(tree):
        os.chmod(dirpath, stat.S_IRWXU)
    shutil.rmtree(tree, ignore_errors=True)


@dataclass(frozen=True)
class TrialPython:
    """The interpreter a trial without an image runs with, as it describes itself."""

    path: str
    prefix: str
    site_dirs: tuple[str, ...]

    @property
    def is_hpcdets(self) -> bool:
        """Whether it is the environment hpcdet itself runs from."""
        return os.path.realpath(self.prefix) == os.path.realpath(sys.prefix)


_PROBE = ("import json,sys,sysconfig;p=sysconfig.get_paths();print(json.dumps([sys.prefix,"
          "list(sys.version_info[:2]),sorted({p['purelib'],p['platlib']})]))")


@functools.cache
def probe(python: str, field: str = "environment.python") -> TrialPython:
    """Ask ``python`` what it is.

    Raises:
        ConfigError: naming ``field`` when it cannot run or is older than Python 3.9.
    """
    found = shutil.which(python)
    try:
        if found is None:
            raise OSError("not found")
        out = subprocess.run([found, "-I", "-c", _PROBE], capture_output=True, text=True,
                             timeout=60, check=True, cwd="/").stdout
        prefix, version, site_dirs = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        raise ConfigError([f"{field}: cannot run {python} ({e}); set it to the Python "
                           "interpreter your trials run with"]) from e
    if tuple(version) < OLDEST_PYTHON:
        raise ConfigError([f"{field}: {python} is Python {version[0]}.{version[1]}; hpcdet's "
                           "trial side needs Python 3.9 or newer"])
    return TrialPython(python, prefix, tuple(site_dirs))
