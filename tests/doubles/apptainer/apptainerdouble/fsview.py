"""The container's filesystem view, built in a private mount namespace (needs root).

The double has no image to mount, so "the image" is the host's operating system: the top-level
directories an OS image holds (KEPT) are the host's, every other top-level directory of the host
is an empty directory, and top-level files are gone.  An image whose registry entry lists
"content" (the double's own modelling of an image's files) also holds those host paths, each
bound read-only at its own path, parent directories made on the double's tmpfs when they lie
under a hidden directory; being part of the image, they go in first, so /tmp, the home directory
and the binds below cover them.  Onto that go the mounts the real runtime makes (apptainer.org
"Bind Paths and Mounts", and apptainer-exec(1) for -c/--contain and --no-home):

- /tmp and /var/tmp: the host's; empty private ones with --contain; with --no-mount tmp the
  image's, empty and read-only;
- the home directory: the host's (the passwd entry's, or --home's SRC at its DEST); an empty
  private one with --contain (unless --home is given); with --no-home it is not mounted (an
  empty directory unless it lies in a kept directory); with --no-mount home nothing is made;
- the host's working directory at its own path, unless --contain or --no-mount cwd;
- each -B/--bind, in order, after all of the above (so binding a path under a hidden directory
  works); "ro" binds are remounted read-only.
Finally the double's tmpfs, the image's own files, is made read-only, as a SIF is (measured,
Apptainer 1.4.5 on Debian, 2026-11-28: /srv, /etc and, with --no-mount tmp, /tmp and /var/tmp
refuse writes with "Read-only file system"); what is mounted on it stays as it was.  /dev is
the host's (no --contain, no private /dev/shm: measured, a file in the host's /dev/shm is seen).

How: the root is assembled on a tmpfs mounted over /tmp in the new namespace (nothing of it is
seen outside the namespace), then the process chroots into it.  Every bind source (and the host
/tmp and home) is opened with O_PATH before anything is mounted, and mounted from
/proc/self/fd/N with `mount --no-canonicalize`, so the source is the host's object even when the
assembly hides its path.

A mount point that does not exist is created when it lies on the double's own tmpfs; creating it
inside a host directory (a kept directory, image content, the bound home or /tmp, another bind)
would change the host, so that fails as apptainer fails without an overlay ("destination X
doesn't exist in container").
"""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
from collections.abc import Sequence

from .binds import Bind, mount_failure
from .messages import Fatal

KEPT = frozenset({"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "run",
                  "sbin", "sys", "usr", "var"})
STAGE = "/tmp"


@dataclasses.dataclass(frozen=True)
class Layout:
    binds: tuple[Bind, ...]
    home: str
    home_mode: str  # "bind" (home_source), "empty" (--contain), "plain" (--no-home), "none"
    contain: bool
    content: tuple[str, ...] = ()
    home_source: str = ""  # what "bind" mounts at home; "" means home itself
    tmp: str = "host"  # "host", "empty" (--contain), "none" (--no-mount tmp)
    cwd: str | None = None  # the host's working directory, mounted at its own path

    @property
    def home_from(self) -> str:
        return self.home_source or self.home


class _Assembly:
    def __init__(self, root: str) -> None:
        self.root = root
        self.mounts: list[tuple[str, bool]] = [("/", False)]  # (container path, host's?)

    def inside(self, path: str) -> str:
        return self.root + path if path != "/" else self.root

    def host_backed(self, path: str) -> bool:
        best = max((m for m in self.mounts if _under(path, m[0])), key=lambda m: len(m[0]))
        return best[1]

    def note(self, path: str, host: bool) -> None:
        self.mounts.append((path, host))


def build(layout: Layout) -> str:
    """Assemble the view; returns the directory to chroot into."""
    fds = _open_sources(layout)
    try:
        top = _top_level()
        _mount(["-t", "tmpfs", "-o", "mode=0755", "hpcdet-apptainer-double", STAGE])
        view = _Assembly(STAGE)
        _populate_top(view, top)
        for path in layout.content:
            _mount_bind(view, Bind(path, path, True), fds[path])
        _mount_tmp(view, fds, layout.tmp)
        _mount_home(view, fds, layout)
        if layout.cwd is not None and layout.cwd in fds:
            _mount_bind(view, Bind(layout.cwd, layout.cwd, False), fds[layout.cwd])
        for bind in layout.binds:
            _mount_bind(view, bind, fds[bind.source])
        _mount(["-o", "remount,ro", view.root])
        return view.root
    finally:
        for fd in fds.values():
            os.close(fd)


def _open_sources(layout: Layout) -> dict[str, int]:
    paths = [*layout.content, *(b.source for b in layout.binds)]
    if layout.tmp == "host":
        paths.append("/tmp")
    if layout.home_mode == "bind":
        paths.append(layout.home_from)
    fds: dict[str, int] = {}
    if layout.cwd is not None:
        try:  # a working directory that is gone is not mounted (the command starts elsewhere)
            fds[layout.cwd] = os.open(layout.cwd, os.O_PATH | os.O_DIRECTORY)
        except OSError:
            pass
    for path in paths:
        if path in fds:
            continue
        try:
            fds[path] = os.open(path, os.O_PATH)
        except OSError:
            bind = next((b for b in layout.binds if b.source == path), Bind(path, path, False))
            raise Fatal(mount_failure(bind, f"mount source {path} doesn't exist")) from None
    return fds


def _top_level() -> list[tuple[str, os.stat_result]]:
    return [(name, os.lstat(f"/{name}")) for name in sorted(os.listdir("/"))]


def _populate_top(view: _Assembly, top: Sequence[tuple[str, os.stat_result]]) -> None:
    for name, st in top:
        inside = view.inside(f"/{name}")
        if stat.S_ISLNK(st.st_mode):
            if name in KEPT:
                os.symlink(os.readlink(f"/{name}"), inside)
        elif stat.S_ISDIR(st.st_mode):
            os.mkdir(inside, 0o755)
            if name in KEPT:
                _mount(["--rbind", f"/{name}", inside])
                view.note(f"/{name}", True)
    if not os.path.isdir(view.inside("/tmp")):
        os.mkdir(view.inside("/tmp"))
    os.chmod(view.inside("/tmp"), 0o1777)


def _mount_tmp(view: _Assembly, fds: dict[str, int], tmp: str) -> None:
    if tmp == "host":
        _mount_fd(fds["/tmp"], view.inside("/tmp"))
        view.note("/tmp", True)
        return
    if tmp == "empty":  # --contain: private and writable
        _mount(["-t", "tmpfs", "-o", "mode=1777", "hpcdet-apptainer-double", view.inside("/tmp")])
        view.note("/tmp", False)
    var_tmp = view.inside("/var/tmp")
    if os.path.isdir(var_tmp):
        options = "mode=1777" if tmp == "empty" else "mode=1777,ro"
        _mount(["-t", "tmpfs", "-o", options, "hpcdet-apptainer-double", var_tmp])
        view.note("/var/tmp", False)


def _mount_home(view: _Assembly, fds: dict[str, int], layout: Layout) -> None:
    home = layout.home
    if layout.home_mode == "none":
        return
    if layout.home_mode == "plain":
        if not _creatable_or_present(view, home):
            return
    _ensure(view, home, directory=True, bind=Bind(layout.home_from, home, False))
    if layout.home_mode == "bind":
        _mount_fd(fds[layout.home_from], view.inside(home))
        view.note(home, True)
    elif layout.home_mode == "empty":
        _mount(["-t", "tmpfs", "-o", "mode=0700", "hpcdet-apptainer-double", view.inside(home)])
        view.note(home, False)


def _mount_bind(view: _Assembly, bind: Bind, fd: int) -> None:
    _ensure(view, bind.target, directory=stat.S_ISDIR(os.fstat(fd).st_mode), bind=bind)
    inside = view.inside(bind.target)
    try:
        _mount_fd(fd, inside)
        if bind.read_only:
            _mount(["-o", "remount,bind,ro", inside])
    except Fatal as e:
        raise Fatal(mount_failure(bind, str(e))) from None
    view.note(bind.target, True)


def _ensure(view: _Assembly, path: str, directory: bool, bind: Bind) -> None:
    """Make the mount point `path` exist in the view, or fail as apptainer does."""
    full = view.inside(path)
    if os.path.lexists(full):
        return
    if not _creatable_or_present(view, path):
        raise Fatal(mount_failure(bind, f"destination {path} doesn't exist in container"))
    if directory:
        os.makedirs(full, 0o755)
    else:
        os.makedirs(os.path.dirname(full), 0o755, exist_ok=True)
        os.close(os.open(full, os.O_WRONLY | os.O_CREAT, 0o644))


def _creatable_or_present(view: _Assembly, path: str) -> bool:
    """Whether `path` exists in the view or can be created without writing to the host."""
    if os.path.lexists(view.inside(path)):
        return True
    ancestor = os.path.dirname(path)
    while not os.path.exists(view.inside(ancestor)):
        ancestor = os.path.dirname(ancestor)
    real = os.path.realpath(view.inside(ancestor))
    if not _under(real, view.root):
        return False
    return not view.host_backed(real[len(view.root):] or "/")


def _under(path: str, top: str) -> bool:
    return top == "/" or path == top or path.startswith(top.rstrip("/") + "/")


def _mount_fd(fd: int, target: str) -> None:
    # Not --rbind: a recursive copy would take along the assembly's own tmpfs whenever the
    # source contains /tmp (or is /tmp).
    _mount(["--bind", f"/proc/self/fd/{fd}", target], fds=(fd,))


def _mount(args: list[str], fds: Sequence[int] = ()) -> None:
    done = subprocess.run(["mount", "--no-canonicalize", *args], pass_fds=tuple(fds),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise Fatal(done.stderr.strip() or f"mount {' '.join(args)} failed")
