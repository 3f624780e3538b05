"""Checks the import contracts of pyproject.toml ([tool.importlinter]) with lint-imports.

lint-imports (grimp) finds a package's modules by walking its one directory, so it would miss
`hpcdet.cli` and `hpcdet.launch`, which setuptools' package-dir maps to cli/ and launchers/.
This script links every module into a temporary tree laid out as installed and runs
lint-imports there; arguments are passed on (e.g. --contract, --verbose).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # mypy depends on tomli before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def link_installed_layout(dest: Path) -> None:
    """Symlinks each package-dir folder's modules to where the installed package has them."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package, folder in setuptools["package-dir"].items():
        source = ROOT / folder
        target = dest.joinpath(*package.split("."))
        for module in source.rglob("*.py"):
            link = target / module.relative_to(source)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(module)


def lint_imports(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs lint-imports on the tree link_installed_layout made; output captured."""
    # The one installed beside this interpreter first: the venv's, whatever PATH says.
    beside = Path(sys.executable).parent / "lint-imports"
    command = str(beside) if beside.exists() else shutil.which("lint-imports")
    if command is None:
        raise SystemExit("lint-imports not found: pip install -e '.[test]'")
    # lint-imports puts its working directory first on sys.path, so `hpcdet` is the tree's.
    config = ["--config", str(ROOT / "pyproject.toml"), "--no-cache", "--no-logo"]
    return subprocess.run([command, *config, *args], cwd=tree, capture_output=True, text=True)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="hpcdet-lint-imports-") as tree:
        link_installed_layout(Path(tree))
        result = lint_imports(Path(tree), *sys.argv[1:])
    print(result.stdout, end="")
    print(result.stderr, end="", file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
