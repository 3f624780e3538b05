"""hpcdet's trial side as a read-only tree that any Python 3.9+ imports with nothing else."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import tomllib

from hpcdet import trialside
from tests.support import REPO


def _modules(tree: Path) -> list[str]:
    names = []
    for path in sorted(tree.rglob("*.py")):
        parts = list(path.relative_to(tree).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def test_every_module_of_the_tree_imports_without_site_packages(tmp_path: Path) -> None:
    tree = trialside.ensure(tmp_path / "trialside")
    modules = _modules(tree)
    assert {"hpcdet.core", "hpcdet.launch.torch_distributed", "determined.core",
            "determined.launch.torch_distributed", "hpcdet.images"} <= set(modules)
    assert not any(m.startswith(("hpcdet.daemon", "hpcdet.store", "hpcdet.cli")) for m in modules)
    torch_side = [m for m in modules if m.startswith(TORCH_SIDE)]
    assert "hpcdet.pytorch.harness" in torch_side and "determined.pytorch" in torch_side
    # -I -S: no site-packages, no PYTHONPATH; only the tree and the standard library.
    _import_from(tree, [m for m in modules if m not in torch_side and m not in REFUSED])
    _refused(tree, [m for m in REFUSED if not m.startswith(TORCH_SIDE)])


REFUSED = ("determined.keras", "determined.pytorch.deepspeed", "determined.launch.horovod")


def test_the_pytorch_api_of_the_tree_imports_with_torch_alone(tmp_path: Path) -> None:
    import torch

    tree = trialside.ensure(tmp_path / "trialside")
    modules = [m for m in _modules(tree) if m.startswith(TORCH_SIDE) and m not in REFUSED]
    # torch's own directory after the tree, its .pth files unread: hpcdet's editable install
    # (a .pth in the same site-packages) stays out of reach.
    _import_from(tree, modules, str(Path(torch.__file__).parents[1]))
    _refused(tree, [m for m in REFUSED if m.startswith(TORCH_SIDE)],
             str(Path(torch.__file__).parents[1]))


TORCH_SIDE = ("hpcdet.pytorch", "determined.pytorch", "determined.exec")


def _refused(tree: Path, modules: list[str], site: str = "") -> None:
    """Determined's modules hpcdet does not offer say so as they are imported."""
    for module in modules:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", "import importlib, sys; "
                               "sys.path.insert(0, sys.argv[1]); "
                               "sys.argv[2] and sys.path.append(sys.argv[2]); "
                               "importlib.import_module(sys.argv[3])", str(tree), site, module],
                              capture_output=True, text=True, cwd="/")
        assert f"ImportError: hpcdet has no {module}" in done.stderr, done.stderr


def _import_from(tree: Path, modules: list[str], site: str = "") -> None:
    script = ("import importlib, sys; sys.path.insert(0, sys.argv[1]); "
              "sys.argv[2] and sys.path.append(sys.argv[2]); "
              "[importlib.import_module(m) for m in sys.argv[3:]]; "
              "assert 'yaml' not in sys.modules and 'jinja2' not in sys.modules; "
              "import hpcdet; assert hpcdet.__file__.startswith(sys.argv[1]), hpcdet.__file__")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", script, str(tree), site, *modules],
                          capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stderr


def test_the_tree_is_read_only_and_shared_by_builds_of_the_same_code(tmp_path: Path) -> None:
    old = os.umask(0o077)  # the daemon's
    try:
        tree = trialside.ensure(tmp_path / "trialside")
    finally:
        os.umask(old)
    for dirpath, dirnames, filenames in os.walk(tree):
        for name in [*dirnames, *filenames, "."]:
            mode = os.stat(os.path.join(dirpath, name)).st_mode
            assert not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), (dirpath, name)
            assert not mode & stat.S_IRWXO, (dirpath, name)  # private, as all hpcdet writes
    assert trialside.ensure(tmp_path / "trialside") == tree
    trialside.remove(tree)
    assert trialside.ensure(tmp_path / "trialside") == tree and tree.is_dir()  # built again
    assert [p.name for p in (tmp_path / "trialside").iterdir()] == [tree.name]
    trialside.remove(tree)
    assert not tree.exists()


def test_the_tree_holds_exactly_the_modules_the_stdlib_contract_checks() -> None:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    stdlib_only = next(c for c in contracts["contracts"] if c["id"] == "trial-side-stdlib")
    copied = {m for m in [*trialside.PACKAGES, *trialside.MODULES] if m != "hpcdet"}
    copied = {m if m != "hpcdet.shim.determined" else "hpcdet.shim" for m in copied}
    assert copied == set(stdlib_only["source_modules"])


def test_a_python_that_cannot_serve_is_refused_naming_the_field(tmp_path: Path) -> None:
    import pytest

    from hpcdet.errors import ConfigError

    with pytest.raises(ConfigError, match="python \\(cluster config\\): cannot run /no/python3"):
        trialside.probe("/no/python3", "python (cluster config)")
    old = tmp_path / "python3"
    old.write_text("#!/bin/sh\necho '[\"/opt/old\", [3, 6], []]'\n")
    old.chmod(0o755)
    with pytest.raises(ConfigError, match="is Python 3.6; hpcdet's trial side needs Python 3.9"):
        trialside.probe(str(old))
    found = trialside.probe(sys.executable)
    assert found.is_hpcdets and found.site_dirs
