"""Snapshotting the context directory at submit (DESIGN.md §2, step 2)."""

from __future__ import annotations

import os
from pathlib import Path

import pathspec

from hpcdet.errors import ContextError
from hpcdet.private import copy_file

# Determined's limit: 96 MiB minus 1 MiB of raw file content.
MAX_CONTEXT_BYTES = 99_614_720
IGNORE_FILES = (".detignore", ".hpcdetignore")
DEFAULT_IGNORES = [
    "__pycache__/", "*.py[co]", "*$py.class", "terraform*", ".git/", ".vscode/", ".idea/",
    ".mypy_cache/", "/shared_fs",
]


def _spec(root: Path) -> pathspec.GitIgnoreSpec:
    lines = list(DEFAULT_IGNORES)
    for name in IGNORE_FILES:
        path = root / name
        if path.is_file():
            lines.extend(path.read_text().splitlines())
    return pathspec.GitIgnoreSpec.from_lines(lines)


def select_files(root: Path) -> list[Path]:
    """Files of the context, relative to ``root``, after the ignore rules."""
    if not root.is_dir():
        raise ContextError(f"context directory {root} does not exist or is not a directory")
    spec = _spec(root)
    chosen: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        dirnames[:] = sorted(
            d for d in dirnames if not spec.match_file(f"{(rel_dir / d).as_posix()}/")
        )
        for name in sorted(filenames):
            rel = rel_dir / name
            if name in IGNORE_FILES or spec.match_file(rel.as_posix()):
                continue
            chosen.append(rel)
    return chosen


def snapshot(root: Path, dest: Path) -> tuple[int, int]:
    """Copy the context into ``dest``; returns (files, bytes). Refuses above the size limit."""
    files = select_files(root)
    sizes = [(root / f).stat().st_size for f in files]
    total = sum(sizes)
    if total > MAX_CONTEXT_BYTES:
        biggest = sorted(zip(sizes, files), reverse=True)[:5]
        listing = "\n".join(f"  {size / 1e6:8.1f} MB  {path}" for size, path in biggest)
        raise ContextError(
            f"the context directory {root} holds {total / 1e6:.1f} MB of files, more than the "
            f"95 MB limit. The biggest files:\n{listing}\nList what the trial does not need in "
            "a .detignore (or .hpcdetignore) file in gitignore syntax, or keep data on the "
            "shared filesystem and read it through bind_mounts or data paths."
        )
    dest.mkdir(parents=True, exist_ok=True)
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        copy_file(root / rel, target)
    return len(files), total
