"""Snapshotting the context directory at submit (DESIGN.md §2, step 2).

What goes into the snapshot, case by case:

- regular files, after the ignore rules (``.detignore``/``.hpcdetignore``, gitignore syntax);
- a symlink to a file (inside the context or not): the file it points to, copied as a
  regular file under the link's name, as the trial would read it through the link;
- a symlink to a directory: its contents, walked like a directory of the context, except
  when it points back at the context or at a directory it lies in (a loop), which is skipped
  with a warning;
- dangling symlinks, FIFOs, sockets and devices: skipped with a warning naming them, since
  they cannot be copied (and reading a FIFO would block);
- an unreadable file or directory: an error naming it, since leaving out code silently
  would break the trial later; fix its permissions or list it in ``.detignore``.

The size limit is checked while walking, so a symlink into a huge tree fails fast.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hpcdet.errors import ContextError, disk_full_cause
from hpcdet.private import copy_file

log = logging.getLogger(__name__)

# Determined's limit: 96 MiB minus 1 MiB of raw file content.
MAX_CONTEXT_BYTES = 99_614_720
# Against symlinks that make a small tree look endless (each directory linked twice inside
# the next): far more entries than any code directory has.
MAX_CONTEXT_ENTRIES = 1_000_000
IGNORE_FILES = (".detignore", ".hpcdetignore")
DEFAULT_IGNORES = [
    "__pycache__/", "*.py[co]", "*$py.class", "terraform*", ".git/", ".vscode/", ".idea/",
    ".mypy_cache/", "/shared_fs",
]

Warn = Callable[[str], None]


class _Matcher(Protocol):
    def match_file(self, file: str) -> bool: ...


# DEFAULT_IGNORES taken apart, for _Defaults.
_IGNORED_DIRS = frozenset({"__pycache__", ".git", ".vscode", ".idea", ".mypy_cache"})
_IGNORED_SUFFIXES = (".pyc", ".pyo", "$py.class")
_IGNORED_PREFIX = "terraform"
_IGNORED_AT_TOP = "shared_fs"


class _Defaults:
    """``DEFAULT_IGNORES`` as gitignore reads them, for a context with no ignore file of its
    own (most of them): importing pathspec costs every create ~35 ms. A test keeps the two
    equal."""

    def match_file(self, file: str) -> bool:
        parts = file.rstrip("/").split("/")
        last = len(parts) - 1
        for i, part in enumerate(parts):
            is_dir = i < last or file.endswith("/")
            if ((is_dir and part in _IGNORED_DIRS) or part.endswith(_IGNORED_SUFFIXES)
                    or part.startswith(_IGNORED_PREFIX)):
                return True
        return parts[0] == _IGNORED_AT_TOP


def _spec(root: Path) -> _Matcher:
    own_lines: list[str] = []
    for name in IGNORE_FILES:
        path = root / name
        if path.is_file():
            try:
                own = path.read_text().splitlines()
            except (OSError, UnicodeDecodeError) as e:
                raise ContextError(f"cannot read the ignore file {path}: {_why(e)}") from None
            for number, line in enumerate(own, 1):
                _check_pattern(path, number, line)
            own_lines.extend(own)
    if not own_lines:
        return _Defaults()
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines([*DEFAULT_IGNORES, *own_lines])


def _check_pattern(path: Path, number: int, line: str) -> None:
    import pathspec

    try:
        pathspec.GitIgnoreSpec.from_lines([line])
    except (ValueError, re.error) as e:
        raise ContextError(
            f"{path}, line {number}: {line!r} is not a valid gitignore pattern ({e}); fix or "
            "remove it"
        ) from None


@dataclass
class _Walk:
    root: Path
    spec: _Matcher
    warn: Warn
    files: list[tuple[Path, int]] = field(default_factory=list)  # (relative path, size)
    total: int = 0
    entries: int = 0

    def directory(self, path: Path, rel: Path, chain: tuple[tuple[int, int], ...]) -> None:
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as e:
            raise _unreadable(self.root, rel, e) from None
        self.entries += len(entries)
        if self.entries > MAX_CONTEXT_ENTRIES:
            raise ContextError(
                f"the context directory {self.root} holds more than {MAX_CONTEXT_ENTRIES} "
                "files and directories (symlinks included). List what the trial does not need "
                "in a .detignore file"
            )
        for entry in entries:
            self.entry(entry, rel / entry.name, chain)

    def _holds_root(self, link: str) -> bool:
        """Whether a symlinked directory is the context or one it lies in (``/``, ``..``)."""
        return self.root.resolve().is_relative_to(os.path.realpath(link))

    def entry(self, entry: os.DirEntry[str], rel: Path, chain: tuple[tuple[int, int], ...]) -> None:
        name = rel.as_posix()
        try:
            st = os.stat(entry.path)  # through symlinks
        except OSError as e:
            if entry.is_symlink():
                if self.spec.match_file(name):
                    return
                self.warn(f"skipped {name!r} in the context: a symlink to nothing ({_why(e)})")
                return
            raise _unreadable(self.root, rel, e) from None
        if stat.S_ISDIR(st.st_mode):
            if self.spec.match_file(f"{name}/"):
                return
            here = (st.st_dev, st.st_ino)
            if here in chain or (entry.is_symlink() and self._holds_root(entry.path)):
                self.warn(f"skipped {name!r} in the context: a symlink back into a directory "
                          "that contains it (a loop)")
                return
            self.directory(Path(entry.path), rel, (*chain, here))
        elif stat.S_ISREG(st.st_mode):
            if entry.name in IGNORE_FILES or self.spec.match_file(name):
                return
            if not os.access(entry.path, os.R_OK):
                raise _unreadable(self.root, rel, PermissionError("permission denied"))
            self.files.append((rel, st.st_size))
            self.total += st.st_size
            if self.total > MAX_CONTEXT_BYTES:
                raise _too_big(self.root, self.files)
        elif not self.spec.match_file(name):
            self.warn(f"skipped {name!r} in the context: a {_kind(st.st_mode)}, not a file")


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "special file"


def _why(e: BaseException) -> str:
    return e.strerror if isinstance(e, OSError) and e.strerror else str(e)


def _unreadable(root: Path, rel: Path, e: BaseException) -> ContextError:
    return ContextError(
        f"cannot read {rel.as_posix()!r} in the context directory {root}: {_why(e)}. Make it "
        "readable, or list it in a .detignore file to leave it out"
    )


def _too_big(root: Path, files: list[tuple[Path, int]]) -> ContextError:
    total = sum(size for _, size in files)
    biggest = sorted(files, key=lambda f: f[1], reverse=True)[:5]
    listing = "\n".join(f"  {size / 1e6:8.1f} MB  {path}" for path, size in biggest)
    return ContextError(
        f"the context directory {root} holds more than the 95 MB limit of files (at least "
        f"{total / 1e6:.1f} MB). The biggest files:\n{listing}\nList what the trial does not "
        "need in a .detignore (or .hpcdetignore) file in gitignore syntax, or keep data on the "
        "shared filesystem and read it through bind_mounts or data paths."
    )


def _walk(root: Path, warn: Warn) -> _Walk:
    if not root.is_dir():
        raise ContextError(f"context directory {root} does not exist or is not a directory")
    st = root.stat()
    walk = _Walk(root, _spec(root), warn)
    walk.directory(root, Path(), ((st.st_dev, st.st_ino),))
    return walk


def _log_warning(message: str) -> None:
    log.warning("%s", message)


def select_files(root: Path, warn: Warn = _log_warning) -> list[Path]:
    """Files of the context, relative to ``root``, after the ignore rules."""
    return [rel for rel, _ in _walk(root, warn).files]


def include(path: Path, dest: Path, warn: Warn | None = None) -> tuple[int, int]:
    """``create --include``: a file or directory beside the context, put at its top under its
    own name (a directory's .detignore applies to it); returns (files, bytes).

    Raises:
        ContextError: it does not exist, or the context already has that name.
    """
    target = dest / path.name
    if not path.exists():
        raise ContextError(f"--include {path}: no such file or directory")
    if target.exists() or target.is_symlink():
        raise ContextError(f"--include {path}: the context already has {path.name}; rename "
                           "one of them")
    if path.is_dir():
        return snapshot(path, target, warn)
    copy_file(path, target)
    return 1, target.stat().st_size


def snapshot(root: Path, dest: Path, warn: Warn | None = None) -> tuple[int, int]:
    """Copy the context into ``dest``; returns (files, bytes). Refuses above the size limit.

    ``warn`` gets one message per entry left out (see the module docstring); by default they
    are logged.
    """
    walk = _walk(root, warn or _log_warning)
    dest.mkdir(parents=True, exist_ok=True)
    for rel, _ in walk.files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            copy_file(root / rel, target)
        except OSError as e:
            if disk_full_cause(e) is not None:
                raise  # the snapshot's side is full: the caller says so and cleans up
            raise _unreadable(root, rel, e) from None  # changed or removed since the walk
    return len(walk.files), walk.total
