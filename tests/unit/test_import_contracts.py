"""The import contracts of pyproject.toml hold, and each one fails when its rule is broken."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("lint_imports", ROOT / "scripts/lint_imports.py")
assert _spec is not None and _spec.loader is not None
lint = importlib.util.module_from_spec(_spec)
sys.modules["lint_imports"] = lint
_spec.loader.exec_module(lint)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    lint.link_installed_layout(tmp_path)
    return tmp_path


def test_the_contracts_hold(tree: Path) -> None:
    result = lint.lint_imports(tree)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("contract", "module", "line"), [
    ("layers", "hpcdet/store/ids.py", "import hpcdet.cli.common"),
    # The import the queue order's move to hpcdet.priority removed.
    ("layers", "hpcdet/daemon/submission.py", "from hpcdet.queue import queue"),
    ("searcher", "hpcdet/search/base.py", "import hpcdet.store.models"),
    ("schedulers", "hpcdet/schedulers/base.py", "import hpcdet.daemon.journal"),
    ("trial-side", "hpcdet/launch/harness.py", "import hpcdet.store"),
    # Indirect: the Core API and the launchers import hpcdet.runspec.
    ("trial-side-stdlib", "hpcdet/runspec.py", "import yaml"),
    ("cli-only-typer", "hpcdet/daemon/requests.py", "import typer"),
    ("store-only-sql", "hpcdet/paths.py", "import sqlite3"),
])
def test_a_broken_rule_fails(tree: Path, contract: str, module: str, line: str) -> None:
    path = tree / module
    text = path.read_text()
    path.unlink()  # a symlink into the repository: replace it, never write through it
    path.write_text(f"{text}\n{line}\n")
    result = lint.lint_imports(tree, "--contract", contract)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{module[:-3].replace('/', '.')} -> " in result.stdout
