"""What keeps a user's hpcdet private on a login node shared with other users.

Three rules. Every directory hpcdet owns is created atomically with mode 0700 and, when it
exists already, accepted only if it is ours and nobody else can write it. Every hpcdet process
runs with umask 077 (027 when the cluster config shares with a group), so whatever it or a trial
writes is private whatever the login shell's umask; what only the daemon uses (its database,
locks, status and local jobs) is 0600/0700 even then (``open_private``). And hpcdet starts its
own Python code isolated (``python -I``): neither a working directory nor an inherited
``PYTHONPATH`` decides what the daemon, a local job, the harness or a launcher imports.
"""

from __future__ import annotations

import functools
import grp
import os
import shutil
import site
import stat
import subprocess
import sys
from pathlib import Path

from hpcdet.errors import HpcdetError, UsageError

PRIVATE_UMASK = 0o077
GROUP_UMASK = 0o027

_umask = PRIVATE_UMASK
_shared: bool | str = False


class PrivacyError(HpcdetError):
    """A directory hpcdet must own belongs to someone else or others can write it."""


def umask_for(share_with_group: bool | str) -> int:
    return GROUP_UMASK if share_with_group else PRIVATE_UMASK


def apply_umask(share_with_group: bool | str = False) -> int:
    """Set this process's umask (its children inherit it); returns the umask set."""
    global _umask, _shared
    _umask, _shared = umask_for(share_with_group), share_with_group
    os.umask(_umask)
    return _umask


def umask_in_force() -> str:
    """The umask hpcdet applied, as batch scripts write it (``077``)."""
    return f"{_umask:03o}"


def sharing() -> bool | str:
    """The share_with_group that ``apply_umask`` was given."""
    return _shared


def tighten_umask() -> None:
    """At least 027 whatever was inherited: for processes started by a script that may not
    set it (a site's own batch template). Only a floor: the shipped templates set the umask
    hpcdet runs with, 077 unless the cluster config shares with a group."""
    os.umask(os.umask(PRIVATE_UMASK) | GROUP_UMASK)


def current_umask() -> int:
    """This process's umask, read without changing it (a trial may run threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(PRIVATE_UMASK)
    os.umask(mask)
    return mask


def copy_file(src: Path, dst: Path) -> None:
    """``shutil.copy2``, but the copy's mode obeys the umask: a world-readable source file
    must not make a world-readable copy in the run tree or a checkpoint."""
    shutil.copy2(src, dst, follow_symlinks=True)
    mode, mask = stat.S_IMODE(os.stat(dst).st_mode), current_umask()
    if mode & mask:
        os.chmod(dst, mode & ~mask)


def open_private(path: Path, flags: int = os.O_RDWR) -> int:
    """A descriptor of ``path``, created if missing as a file only its owner can open: 0600
    whatever the umask (a group the cluster config shares with included), a wider mode an
    older hpcdet left closed, and never through a symlink.

    For what must stay the daemon's alone though it may lie in a shared state directory: a
    group member who can open a lock or the database can hold a lock on it and stop the
    daemon (issue 37)."""
    fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o077 and st.st_uid == os.getuid():
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o700)
    except OSError:
        os.close(fd)
        raise
    return fd


def close_file(path: Path) -> None:
    """An existing file of ours (not a symlink) cut to its owner's bits; nothing if missing.

    By its name, never opened: closing a descriptor of the database would drop the POSIX
    locks SQLite holds on it in this process."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid() or not st.st_mode & 0o077:
        return
    os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)


def private_dir(path: Path, share_with_group: bool | str | None = False) -> Path:
    """``path`` as a directory only we can write (and, unless shared, read).

    Missing directories (and missing parents) are created with mode 0700 in one ``mkdir``, so
    there is no instant at which another user could open them. An existing one must be ours,
    reached through no symlink of another user, and writable by nobody else; it is then set to
    0700 (0750 when shared with a group; a named group is set on it with the setgid bit, so what
    is created below inherits the group). ``share_with_group=None`` leaves an existing
    directory's mode as it is.

    Raises:
        PrivacyError: saying which path is wrong and what to do about it.
    """
    _make_missing(path)
    check_owned(path)
    if share_with_group is not None:
        _set_sharing(path, share_with_group)
    return path


def _make_missing(path: Path) -> None:
    """Create ``path`` and its missing parents, each 0700 and checked as ours."""
    missing = []
    while not path.exists() and not path.is_symlink() and path != path.parent:
        missing.append(path)
        path = path.parent
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise PrivacyError(f"cannot create the directory {p}: {e.strerror}") from e
        check_owned(p)


def download_target(given: Path) -> Path:
    """``given`` made absolute, once checked to be new or an empty directory of the user's in
    a directory only they (or root, with a sticky bit) can change; its parent is made when
    missing.

    Raises:
        UsageError, PrivacyError: saying which directory and what to do.
    """
    target = given.absolute()
    if os.path.lexists(target):
        check_owned(target)
        if any(target.iterdir()):
            raise UsageError(f"{target} already holds files: download into a new or empty "
                             "directory")
    if os.path.lexists(target.parent):
        check_holder(target.parent, "Download into a new directory of yours, or make it yours "
                     "alone")
    else:
        private_dir(target.parent)  # it and its missing parents made 0700
    return target


def check_owned(path: Path) -> None:
    """Refuse ``path`` unless it is a directory of ours that nobody else can write."""
    target = _check_owners(path, (os.getuid(),))
    if target.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PrivacyError(
            f"{path} can be written by other users (mode {stat.S_IMODE(target.st_mode):04o}), "
            f"who could plant code or data in it; make it yours alone (chmod go-w {path}) "
            f"or remove it"
        )


def check_holder(path: Path, other: str = "Set HPCDET_LOCAL_DIR to a directory of yours, or "
                 "make it yours alone") -> None:
    """Refuse a directory the user chose to hold hpcdet's own (``$HPCDET_LOCAL_DIR``, a
    checkpoint storage's host_path, where a download goes) unless nobody but the user or root
    can rename or replace what is in it: it is theirs or root's, and others may write it only
    with the sticky bit set (as in /tmp). Its mode is left as it is. ``other``: what the user
    can do instead, said before the chmod that fixes it."""
    target = _check_owners(path, (os.getuid(), 0))
    if target.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not target.st_mode & stat.S_ISVTX:
        raise PrivacyError(
            f"{path} can be written by other users and has no sticky bit (mode "
            f"{stat.S_IMODE(target.st_mode):04o}): they could replace hpcdet's directory in "
            f"it. {other} (chmod go-w {path})"
        )


def check_trusted(path: Path) -> None:
    """Refuse a directory or file hpcdet takes code from on the user's word (a site's batch
    templates, ``template_dir``) unless only the user or root can change it: it, and any
    symlink to it, is theirs or root's, and neither its group nor other users can write it.
    A sticky bit is no excuse here: whoever made a file in a sticky directory may rewrite it."""
    target = _check_owners(path, (os.getuid(), 0), directory=False)
    if target.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PrivacyError(
            f"{path} can be written by other users (mode {stat.S_IMODE(target.st_mode):04o}), "
            f"who could change what hpcdet runs as you; make it yours alone (chmod go-w {path})"
        )


def check_storage(host: Path, directory: Path) -> None:
    """Refuse checkpoint storage in which another user could swap or plant checkpoints:
    ``directory`` (where the checkpoints go, at or below ``host``), when it exists, must be
    the user's and writable by nobody else; each existing directory from ``host`` down to it,
    the user's or root's and writable by others only with the sticky bit (as /scratch)."""
    chain = [directory, *(p for p in directory.parents if p.is_relative_to(host))]
    *above, last = reversed(chain)
    for path in above:
        if os.path.lexists(path):
            check_holder(path, "Use a directory of yours, or make it yours alone")
    if os.path.lexists(last):
        check_owned(last)


def _check_owners(path: Path, owners: tuple[int, ...], directory: bool = True) -> os.stat_result:
    """``path``'s target, refused unless it and any symlink to it belong to ``owners``; it
    must be a directory unless ``directory`` is False."""
    try:
        link = os.lstat(path)
        target = os.stat(path)
    except OSError as e:
        raise PrivacyError(f"cannot use {path}: {e.strerror}") from e
    fix = _remedy(path, target.st_uid if link.st_uid in owners else link.st_uid)
    if link.st_uid not in owners:
        what = ("a symlink" if stat.S_ISLNK(link.st_mode)
                else "a directory" if stat.S_ISDIR(link.st_mode) else "a file")
        raise PrivacyError(
            f"{path} is {what} owned by {_user(link.st_uid)}, not by you: another user may have "
            f"made it to read or run your work. {fix}"
        )
    if directory and not stat.S_ISDIR(target.st_mode):
        raise PrivacyError(f"{path} is not a directory; remove it (rm {path}) and try again")
    if target.st_uid not in owners:
        raise PrivacyError(
            f"{path} leads to {'a directory' if directory else 'something'} owned by "
            f"{_user(target.st_uid)}, not by you. {fix}"
        )
    return target


def _remedy(path: Path, owner: int) -> str:
    if str(path).startswith("/var/tmp/") or str(path).startswith("/tmp/"):
        return (f"Ask {_user(owner)} or an administrator to remove {path}, or use a "
                f"directory of yours (for the database: set HPCDET_LOCAL_DIR to one on local "
                f"disk).")
    return f"Remove {path} (or ask {_user(owner)} or an administrator to), then try again."


def _user(uid: int) -> str:
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _set_sharing(path: Path, share_with_group: bool | str) -> None:
    mode = 0o750 if share_with_group else 0o700
    if isinstance(share_with_group, str):
        try:
            gid = grp.getgrnam(share_with_group).gr_gid
            if os.stat(path).st_gid != gid:
                os.chown(path, -1, gid)
        except (KeyError, PermissionError) as e:
            raise PrivacyError(
                f"cannot share {path} with group {share_with_group!r} (share_with_group in the "
                f"cluster config): you must belong to that group ({e})"
            ) from e
        mode |= stat.S_ISGID
    if stat.S_IMODE(os.stat(path).st_mode) != mode:
        os.chmod(path, mode)


def exposure(path: Path, shared: bool | str = False) -> str | None:
    """Why ``path`` is not private (open to others), or None; with ``shared`` (the cluster
    config's share_with_group) the group may read it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    group = stat.S_IWGRP if shared else stat.S_IRWXG
    who = []
    if mode & group:
        who.append("its group")
    if mode & stat.S_IRWXO:
        who.append("every user")
    if not who:
        return None
    return f"{path} is open to {' and '.join(who)} (mode {stat.S_IMODE(mode):04o})"


# ------------------------------------------------------------------- isolated interpreters


@functools.cache
def _needs_explicit_root(python: str) -> str | None:
    """hpcdet's install location, when ``python -I`` would not find this very copy on its own
    (``pip install --user``, a checkout on PYTHONPATH); None when it would."""
    import hpcdet

    package = Path(hpcdet.__file__).resolve().parent
    if python != sys.executable:
        return None  # another interpreter (a site's template, a test): its own hpcdet
    if str(package.parent) in site.getsitepackages():
        return None
    probe = subprocess.run(
        [python, "-I", "-c", "import hpcdet; print(hpcdet.__file__)"],
        capture_output=True, text=True, cwd="/", check=False,
    )
    found = probe.stdout.strip()
    if probe.returncode == 0 and Path(found).resolve().parent == package:
        return None
    return str(package.parent)


_BOOT = (
    "import runpy,site,sys;r={root!r};site.addsitedir(r);sys.path.remove(r);"
    "sys.path.insert(0,r);runpy.run_module({module!r},run_name='__main__',alter_sys=True)"
)


def hpcdet_command(module: str, python: str | None = None) -> list[str]:
    """The argv that runs hpcdet's ``module`` like ``python -m``, isolated (``-I``): the
    working directory, ``PYTHONPATH`` and ``PYTHON*`` variables play no part, and hpcdet comes
    from where it is installed, also from a user site-packages ``-I`` would skip."""
    python = python or sys.executable
    root = _needs_explicit_root(python)
    if root is None:
        return [python, "-I", "-m", module]
    return [python, "-I", "-c", _BOOT.format(root=root, module=module)]
