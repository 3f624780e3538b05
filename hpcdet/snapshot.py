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
- a symlink leading under ``/proc``, ``/sys`` or ``/dev`` (``/dev/shm`` aside): an error
  naming it, since the kernel makes those files up as they are read and their size says
  nothing of what reading gives (``/proc/self/pagemap`` says 0 and gives terabytes);
- an unreadable file or directory: an error naming it, since leaving out code silently
  would break the trial later; fix its permissions or list it in ``.detignore``.

The size limit holds for the context and its ``--include``s together. It is checked on the
sizes while walking, so a symlink into a huge tree fails fast, and on the bytes as they are
copied, so a file that grows meanwhile is cut off at the limit. A snapshot that fails leaves
nothing behind of what it began.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hpcdet.errors import ContextError, disk_full_cause

log = logging.getLogger(__name__)

# Determined's limit: 96 MiB minus 1 MiB of raw file content.
MAX_CONTEXT_BYTES = 99_614_720
# Against symlinks that make a small tree look endless (each directory linked twice inside
# the next): far more entries than any code directory has.
MAX_CONTEXT_ENTRIES = 1_000_000
IGNORE_FILES = (".detignore", ".hpcdetignore")
# Where files are the kernel's, not data; /dev/shm is a plain tmpfs.
_KERNEL_TREES = ("/proc", "/sys", "/dev")
_NOT_KERNEL = "/dev/shm"
_CHUNK = 8 << 20
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
class _Found:
    rel: Path
    size: int
    key: tuple[int, int]  # (st_dev, st_ino) at the walk: the file the copy must open


@dataclass
class _Walk:
    root: Path
    spec: _Matcher
    warn: Warn
    files: list[_Found] = field(default_factory=list)
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

    def _ignored(self, name: str) -> bool:
        return bool(self.spec.match_file(name) or self.spec.match_file(f"{name}/"))

    def entry(self, entry: os.DirEntry[str], rel: Path, chain: tuple[tuple[int, int], ...]) -> None:
        name = rel.as_posix()
        if entry.is_symlink():
            kernel = _kernel_path(entry.path)
            if kernel is not None:
                if self._ignored(name):
                    return
                raise _kernel_file(f"{name!r} in the context directory {self.root}", kernel,
                                   "Remove the symlink, or list it in a .detignore file to "
                                   "leave it out")
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
            self.files.append(_Found(rel, st.st_size, (st.st_dev, st.st_ino)))
            self.total += st.st_size
        elif not self.spec.match_file(name):
            self.warn(f"skipped {name!r} in the context: a {_kind(st.st_mode)}, not a file")


def _kernel_path(path: str | Path) -> str | None:
    """Where ``path`` leads when that is under /proc, /sys or /dev (/dev/shm aside)."""
    real = os.path.realpath(path)
    if real == _NOT_KERNEL or real.startswith(f"{_NOT_KERNEL}/"):
        return None
    if any(real == top or real.startswith(f"{top}/") for top in _KERNEL_TREES):
        return real
    return None


def _kernel_file(what: str, real: str, fix: str) -> ContextError:
    return ContextError(
        f"{what} leads to {real}, a file of the kernel, not data: its size says nothing of "
        f"what reading it gives, so hpcdet does not copy it. {fix}"
    )


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


def _too_big(what: str, files: list[tuple[str, int]], passed: str | None = None) -> ContextError:
    total = sum(size for _, size in files)
    biggest = sorted(files, key=lambda f: f[1], reverse=True)[:5]
    listing = "\n".join(f"  {size / 1e6:8.1f} MB  {path}" for path, size in biggest)
    cut = f"; {passed!r} passed the limit while it was copied" if passed else ""
    return ContextError(
        f"{what} holds more than the 95 MB limit of files (at least {total / 1e6:.1f} MB"
        f"{cut}). The biggest files:\n{listing}\nList what the trial does not need in a "
        ".detignore (or .hpcdetignore) file in gitignore syntax, or keep data on the shared "
        "filesystem and read it through bind_mounts or data paths."
    )


def _walk(root: Path, warn: Warn) -> _Walk:
    if not root.is_dir():
        raise ContextError(f"context directory {root} does not exist or is not a directory")
    kernel = _kernel_path(root)
    if kernel is not None:
        raise _kernel_file(f"the context directory {root}", kernel,
                           "Give a directory of your own as the context")
    st = root.stat()
    walk = _Walk(root, _spec(root), warn)
    walk.directory(root, Path(), ((st.st_dev, st.st_ino),))
    return walk


def _log_warning(message: str) -> None:
    log.warning("%s", message)


def select_files(root: Path, warn: Warn = _log_warning) -> list[Path]:
    """Files of the context, relative to ``root``, after the ignore rules."""
    return [found.rel for found in _walk(root, warn).files]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


class Snapshot:
    """The context copied into ``dest`` with its includes; ``files`` and ``bytes`` count what
    was copied. ``limit`` (default ``MAX_CONTEXT_BYTES``) holds for all of it together.

    ``warn`` gets one message per entry left out (see the module docstring); by default they
    are logged.
    """

    def __init__(self, dest: Path, warn: Warn | None = None, limit: int | None = None) -> None:
        self.dest = dest
        self.warn = warn or _log_warning
        self.limit = MAX_CONTEXT_BYTES if limit is None else limit
        self.copied: list[tuple[str, int]] = []  # (name in the snapshot, bytes copied)
        self.files = 0
        self.bytes = 0
        self.what = "the context"

    def context(self, root: Path) -> None:
        """Copy the context directory ``root``; on an error nothing of it is left in ``dest``.

        Raises:
            ContextError: see the module docstring.
        """
        self.what = f"the context directory {root}"
        made = not os.path.lexists(self.dest)
        try:
            self._tree(root, self.dest, Path())
        except BaseException:
            if made:
                _remove(self.dest)
            raise

    def include(self, path: Path) -> None:
        """``create --include``: a file or directory beside the context, put at its top under
        its own name (a directory's .detignore applies to it); on an error nothing of it is
        left in ``dest``.

        Raises:
            ContextError: it does not exist, is no file or directory, the context already has
                that name, or the limit is passed.
        """
        target = self.dest / path.name
        try:
            st = path.stat()
        except OSError as e:
            raise ContextError(f"--include {path}: {_why(e)}") from None
        if os.path.lexists(target):
            raise ContextError(f"--include {path}: the context already has {path.name}; rename "
                               "one of them")
        kernel = _kernel_path(path)
        if kernel is not None:
            raise _kernel_file(f"--include {path}", kernel, "Include a file of your own")
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            raise ContextError(f"--include {path}: a {_kind(st.st_mode)}, not a file or a "
                               "directory")
        self.what = self.what.removesuffix(" with its --include files") + (
            " with its --include files")
        try:
            if stat.S_ISDIR(st.st_mode):
                self._tree(path, target, Path(path.name))
            else:
                self._estimate([(path.name, st.st_size)])
                try:
                    self._copy(path, target, path.name, (st.st_dev, st.st_ino))
                except OSError as e:
                    if disk_full_cause(e) is not None:
                        raise
                    raise ContextError(f"--include {path}: {_why(e)}") from None
        except BaseException:
            _remove(target)
            raise

    def _estimate(self, more: list[tuple[str, int]]) -> None:
        """Fail before copying when the sizes the files claim already pass the limit."""
        if self.bytes + sum(size for _, size in more) > self.limit:
            raise _too_big(self.what, [*self.copied, *more])

    def _tree(self, root: Path, dest: Path, prefix: Path) -> None:
        walk = _walk(root, self.warn)
        self._estimate([((prefix / f.rel).as_posix(), f.size) for f in walk.files])
        dest.mkdir(parents=True, exist_ok=True)
        for found in walk.files:
            target = dest / found.rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._copy(root / found.rel, target, (prefix / found.rel).as_posix(), found.key)
            except OSError as e:
                if disk_full_cause(e) is not None:
                    raise  # the snapshot's side is full: the caller says so and cleans up
                raise _unreadable(root, found.rel, e) from None  # changed since the walk

    def _copy(self, src: Path, dst: Path, name: str, key: tuple[int, int]) -> None:
        """Copy one file, counting its bytes against the limit as they come: a file may be
        other than the walk saw (grown, or swapped for a FIFO) by now."""
        # O_NONBLOCK: a FIFO put in the file's place must not block the open.
        fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != key:
                raise ContextError(f"{name!r} in {self.what} changed while it was copied; "
                                   "submit again once it stays as it is")
            out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                          stat.S_IMODE(st.st_mode) & 0o777)  # less the umask, by open(2)
            try:
                room = self.limit - self.bytes
                copied = _pump(fd, out, room + 1)
                if copied > room:
                    raise _too_big(self.what, [*self.copied, (name, copied)], passed=name)
                os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(out)
        finally:
            os.close(fd)
        self.copied.append((name, copied))
        self.files += 1
        self.bytes += copied


def _pump(src: int, dst: int, most: int) -> int:
    """Copy from ``src`` to ``dst`` until its end or ``most`` bytes; returns the bytes copied."""
    copied = 0
    use_sendfile = True
    while copied < most:
        want = min(_CHUNK, most - copied)
        if use_sendfile:
            try:
                n = os.sendfile(dst, src, None, want)
            except OSError as e:
                if copied or e.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    raise
                use_sendfile = False  # a file system without it
                continue
        else:
            data = os.read(src, want)
            n = len(data)
            view = memoryview(data)
            while view:
                view = view[os.write(dst, view):]
        if n == 0:
            break
        copied += n
    return copied


def snapshot(root: Path, dest: Path, warn: Warn | None = None) -> tuple[int, int]:
    """Copy the context into ``dest``; returns (files, bytes). Refuses above the size limit."""
    taken = Snapshot(dest, warn)
    taken.context(root)
    return taken.files, taken.bytes
