"""The import contracts of pyproject.toml hold, and each one fails when its rule is broken."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("lint_imports", ROOT / "scripts/lint_imports.py")
assert _spec is not None and _spec.loader is not None
lint = importlib.util.module_from_spec(_spec)
sys.modules["lint_imports"] = lint
_spec.loader.exec_module(lint)


TRIAL_SIDE = ("hpcdet.core", "hpcdet.launch", "hpcdet.shim")
# Run in the tree, whose `hpcdet` has cli/ and launchers/ where the installed package has them.
_IMPORTED_OUTSIDE_HPCDET = """
import sys, grimp
graph = grimp.build_graph("hpcdet", include_external_packages=True)
names = set().union(*(graph.find_upstream_modules(p, as_package=True) for p in sys.argv[1:]))
print(*sorted(n for n in names if n.split(".")[0] != "hpcdet"))
"""


def imported_outside_hpcdet(tree: Path, *packages: str) -> set[str]:
    """Every module outside hpcdet that the packages import, directly or not."""
    result = subprocess.run([sys.executable, "-c", _IMPORTED_OUTSIDE_HPCDET, *packages],
                            cwd=tree, capture_output=True, text=True, check=True)
    return set(result.stdout.split())


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    lint.link_installed_layout(tmp_path)
    return tmp_path


def test_the_contracts_hold(tree: Path) -> None:
    result = lint.lint_imports(tree)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("contract", "module", "line"), [
    ("layers", "hpcdet/ids.py", "import hpcdet.cli.common"),
    # The import the queue order's move to hpcdet.priority removed.
    ("layers", "hpcdet/daemon/submission.py", "from hpcdet.views.queue import queue"),
    ("searcher", "hpcdet/search/base.py", "import hpcdet.store.models"),
    ("schedulers", "hpcdet/schedulers/base.py", "import hpcdet.daemon.journal"),
    ("trial-side", "hpcdet/launch/harness.py", "import hpcdet.store"),
    # Indirect: the Core API and the launchers import hpcdet.rundir.spec.
    ("trial-side-stdlib", "hpcdet/rundir/spec.py", "import yaml"),
    ("cli-only-typer", "hpcdet/daemon/requests.py", "import typer"),
    ("store-only-sql", "hpcdet/paths.py", "import sqlite3"),
    # Issue 40: the faces over the views.
    ("cli-over-views", "hpcdet/cli/trial.py", "import hpcdet.store.repository"),
    ("store-writers", "hpcdet/views/lookups.py", "import hpcdet.store.repository"),
    ("cli-over-views", "hpcdet/cli/daemon.py", "import hpcdet.daemon.loop"),
    ("ui-over-views", "hpcdet/ui/api.py", "import hpcdet.store.reads"),
    ("store-importers", "hpcdet/link/files.py", "import hpcdet.store.repository"),
    ("link-no-daemon", "hpcdet/link/files.py", "import hpcdet.daemon.requests"),
    # Issue 41: the laptop's SSH side stays out of what runs on the login node.
    ("remote-is-the-laptop-s", "hpcdet/daemon/loop.py", "import hpcdet.remote.keeper"),
    ("remote-is-the-laptop-s", "hpcdet/views/lookups.py", "import paramiko"),
])
def test_a_broken_rule_fails(tree: Path, contract: str, module: str, line: str) -> None:
    path = tree / module
    text = path.read_text()
    path.unlink()  # a symlink into the repository: replace it, never write through it
    path.write_text(f"{text}\n{line}\n")
    result = lint.lint_imports(tree, "--contract", contract)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{module[:-3].replace('/', '.')} -> " in result.stdout


@pytest.mark.skipif(sys.version_info < (3, 10), reason="needs sys.stdlib_module_names")
def test_trial_side_code_imports_only_the_standard_library(tree: Path) -> None:
    # The forbidden contract names hpcdet's own dependencies; this catches any other package.
    imported = imported_outside_hpcdet(tree, *TRIAL_SIDE)
    assert "json" in imported  # the graph reached the trial side's imports at all
    # mpi4py is the user's own, imported only when a trial asks for MPI; torch and numpy are
    # the user's own too, imported only by the PyTorch API (hpcdet.pytorch).
    allowed = sys.stdlib_module_names | {"mpi4py"}
    outside = {name.split(".")[0] for name in imported} - allowed
    assert outside == {"torch", "numpy"}
    # The torch_distributed launcher serves the workers' rendezvous store with torch itself; it
    # runs only on the trial's interpreter and checks torch is there. No other launcher may.
    launchers = {f"hpcdet.launch.{p.stem}" for p in (ROOT / "launchers").glob("[!_]*.py")}
    assert "hpcdet.launch.torch_distributed" in launchers
    no_torch = imported_outside_hpcdet(
        tree, "hpcdet.core", *sorted(launchers - {"hpcdet.launch.torch_distributed"}))
    assert {name.split(".")[0] for name in no_torch} - allowed == set()
    assert "torch" in {n.split(".")[0] for n in imported_outside_hpcdet(
        tree, "hpcdet.launch.torch_distributed")}
