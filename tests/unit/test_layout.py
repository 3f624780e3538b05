"""The store's boundary, read off the source: its SQLModel rows and its stored JSON columns
stay inside ``hpcdet/store`` (everything else gets ``hpcdet.records``), and no module grows
past 500 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for folder in ("hpcdet", "cli", "launchers")
                 for p in (ROOT / folder).rglob("*.py"))
STORE = ROOT / "hpcdet" / "store"
# The metric chunks' one codec (issue 40, item 3), which the store's ingest and queries call.
CODECS = {"hpcdet/rundir/metric_codec.py"}
OUTSIDE_STORE = [p for p in SOURCES if STORE not in p.parents
                 and p.relative_to(ROOT).as_posix() not in CODECS]

# None over 500 lines since issue 40; a module that grows past it is split by concept.
LONG_MODULES: set[str] = set()


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def row_class_imports(tree: ast.AST) -> list[int]:
    """Lines that import the store's SQLModel rows (hpcdet.store.models)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        if any(n == "hpcdet.store.models" or n.startswith("hpcdet.store.models.")
               for n in names):
            found.append(node.lineno)
    return found


def _stored_column(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr.endswith("_json")
    if isinstance(node, ast.Name):
        return node.id.endswith("_json")
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return isinstance(node.slice.value, str) and node.slice.value.endswith("_json")
    return False


def stored_json_decodes(tree: ast.AST) -> list[int]:
    """Lines that json.loads a stored *_json column."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "loads" and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "json" and node.args and _stored_column(node.args[0])]


def test_the_checks_find_what_they_look_for() -> None:
    tree = ast.parse("from hpcdet.store.models import Trial\nimport hpcdet.store.models\n"
                     "from hpcdet.store import models\n"
                     "x = json.loads(t.hparams_json)\ny = json.loads(row['ops_json'])\n"
                     "z = json.loads(text)\n")
    assert row_class_imports(tree) == [1, 2, 3]
    assert stored_json_decodes(tree) == [4, 5]


@pytest.mark.parametrize("path", OUTSIDE_STORE, ids=_name)
def test_rows_and_stored_json_stay_in_the_store(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    assert row_class_imports(tree) == [], f"{_name(path)} imports the store's rows"
    assert stored_json_decodes(tree) == [], f"{_name(path)} decodes a stored JSON column"


def test_no_module_is_over_500_lines() -> None:
    long = {_name(p) for p in SOURCES if len(p.read_text().splitlines()) > 500}
    assert long <= LONG_MODULES, f"over 500 lines: {sorted(long - LONG_MODULES)}"


# Daemon modules tested through others rather than by a file of their own, and why.
THROUGH_OTHERS = {
    "loop": "the loop that every integration test runs (tests/integration/)",
    "configs": "the parsed-config cache, behind every service test's world (services/support.py)",
    "requests": "the request files' serving, tested with their format in tests/unit/protocol/",
    "packing": "Submission's pilots, tested in tests/unit/test_packing.py and "
               "tests/integration/test_packing_local.py",
}


def test_every_daemon_module_has_a_test_file_of_its_own() -> None:
    modules = {p.stem for p in (ROOT / "hpcdet" / "daemon").glob("*.py")} - {
        "__init__", "__main__"}
    tested = {p.stem.removeprefix("test_")
              for p in (ROOT / "tests" / "unit" / "daemon").rglob("test_*.py")}
    assert sorted(modules - tested - THROUGH_OTHERS.keys()) == []
    assert sorted(THROUGH_OTHERS.keys() - modules) == []  # a module gone: its excuse goes too


def test_every_package_is_installed() -> None:
    """setuptools installs only the packages pyproject.toml lists: one left out works in the
    tree and is missing from the wheel."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "hpcdet").rglob("__init__.py") if "__pycache__" not in p.parts}
    assert sorted(found - listed) == []
