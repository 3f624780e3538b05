"""Directories hpcdet owns, and what hpcdet's own processes import (issue 9, item 1)."""

from __future__ import annotations

import grp
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcdet import private
from hpcdet.config import load_cluster_config
from hpcdet.errors import ConfigError, HpcdetError
from hpcdet.paths import StatePaths
from hpcdet.protocol import process
from tests.support import Hpcdet, require_root

OTHER_UID = 54321  # no such account needed: only root can give a file to another uid
needs_root = pytest.mark.usefixtures("as_root")


@pytest.fixture
def as_root() -> None:
    require_root("chown to another uid needs root")


@pytest.fixture
def on_nfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StatePaths]:
    """A state directory on a (pretend) network filesystem, its database dir in ``base``."""
    monkeypatch.setenv("HPCDET_FSTYPE", "nfs4")
    monkeypatch.setenv("HPCDET_LOCAL_DIR", str(tmp_path / "base"))
    (tmp_path / "cluster.yaml").write_text("backend: local\n")
    monkeypatch.setenv("HPCDET_CLUSTER_CONFIG", str(tmp_path / "cluster.yaml"))
    monkeypatch.setenv("HPCDET_SITE_CONFIG", str(tmp_path / "site.yaml"))
    (tmp_path / "site.yaml").write_text("{}\n")
    paths = StatePaths(tmp_path / "state")
    yield paths
    process.stop(paths)


@needs_root
def test_a_database_dir_made_by_another_user_is_refused(on_nfs: StatePaths) -> None:
    base = on_nfs.local_dir().parent
    on_nfs.local_dir().mkdir(parents=True, mode=0o777)
    os.chown(base, OTHER_UID, OTHER_UID)
    with pytest.raises(HpcdetError, match=f"{base} is a directory owned by uid {OTHER_UID}") \
            as refused:
        process.acquire_lock(on_nfs)
    assert "HPCDET_LOCAL_DIR" in str(refused.value) and "remove" in str(refused.value)
    assert not on_nfs.lock().exists()


def test_a_group_writable_database_dir_is_refused(on_nfs: StatePaths) -> None:
    local = on_nfs.local_dir()
    local.mkdir(parents=True)
    local.chmod(0o770)
    with pytest.raises(HpcdetError, match=f"chmod go-w {local}"):
        process.acquire_lock(on_nfs)
    assert not on_nfs.lock().exists()


@needs_root
def test_a_symlink_planted_by_another_user_is_refused(on_nfs: StatePaths, tmp_path: Path) -> None:
    base = on_nfs.local_dir().parent
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    base.symlink_to(target)
    os.lchown(base, OTHER_UID, OTHER_UID)
    with pytest.raises(HpcdetError, match=f"{base} is a symlink owned by uid {OTHER_UID}"):
        process.acquire_lock(on_nfs)
    assert list(target.iterdir()) == []


def test_fresh_directories_are_private_whatever_the_umask(on_nfs: StatePaths) -> None:
    before = os.umask(0o022)
    try:
        on_nfs.prepare()
    finally:
        os.umask(before)
    local = on_nfs.local_dir()
    for path in (on_nfs.root, on_nfs.requests, on_nfs.runs, local.parent, local):
        assert path.stat().st_mode & 0o7777 == 0o700, path


def test_a_planted_hpcdet_package_never_runs_in_the_daemon(
    on_nfs: StatePaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's working directory and an inherited PYTHONPATH both hold an ``hpcdet``
    package that leaves a mark when imported; the daemon starts and serves, unmarked."""
    marker = tmp_path / "planted-ran"
    planted = f"open({str(marker)!r}, 'w').write('ran')\n"
    on_nfs.local_dir().mkdir(parents=True, mode=0o700)
    for where in (on_nfs.local_dir(), tmp_path / "pythonpath"):
        (where / "hpcdet").mkdir(parents=True)
        (where / "hpcdet" / "__init__.py").write_text(planted)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "pythonpath"))
    current = process.start(on_nfs)
    assert current.alive and current.here
    assert not marker.exists()


def test_share_with_group_is_checked_in_the_cluster_config(tmp_path: Path) -> None:
    user = tmp_path / "cluster.yaml"
    for value, shared in (("true", True), ("adm", "adm"), ("false", False)):
        user.write_text(f"share_with_group: {value}\n")
        assert load_cluster_config(user_path=user, env={}).share_with_group == shared
    for value, problem in (("no-such-group-here", "no group named 'no-such-group-here'"),
                           ("5", "must be false (private, the default), true")):
        user.write_text(f"share_with_group: {value}\n")
        with pytest.raises(ConfigError, match="share_with_group") as bad:
            load_cluster_config(user_path=user, env={})
        assert problem in str(bad.value)


@needs_root
def test_sharing_with_a_group_opens_the_state_and_run_tree_to_it_only(
    on_nfs: StatePaths,
) -> None:
    adm = grp.getgrnam("adm").gr_gid
    on_nfs.prepare("adm")
    for path in (on_nfs.root, on_nfs.runs):
        assert (path.stat().st_mode & 0o7777, path.stat().st_gid) == (0o2750, adm), path
    for path in (on_nfs.requests, on_nfs.local_dir()):
        assert path.stat().st_mode & 0o7777 == 0o700, path
    on_nfs.prepare(False)  # sharing turned off: closed again at the next start
    assert on_nfs.root.stat().st_mode & 0o7777 == 0o700


def test_sharing_holds_when_the_database_is_in_the_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPCDET_FSTYPE", "ext4")
    paths = StatePaths(tmp_path / "state")
    paths.prepare(True)
    lock = process.acquire_lock(paths)
    assert lock is not None and paths.lock().parent == paths.root
    lock.close()
    assert paths.root.stat().st_mode & 0o7777 == 0o750


def test_the_daemons_own_files_stay_0600_under_the_group_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a state directory shared with a group, the database (and the -wal and -shm SQLite
    gives its mode), the lock and the local jobs' counter are the user's alone, and those an
    older hpcdet left 0640 are closed (issue 37)."""
    from hpcdet.schedulers.local_exec import _next_id
    from hpcdet.store.repository import Store

    monkeypatch.setenv("HPCDET_FSTYPE", "ext4")
    paths = StatePaths(tmp_path / "state")
    before = os.umask(private.GROUP_UMASK)
    try:
        paths.prepare(True)
        lock = process.acquire_lock(paths)
        store = Store(paths.database())
        with store.engine.connect() as conn:
            conn.exec_driver_sql("CREATE TABLE t (x)")
            conn.commit()
        assert _next_id(paths.local_jobs()) == 1
        own = [paths.lock(), paths.local_jobs() / "counter",
               *(paths.root / f"hpcdet.db{s}" for s in ("", "-wal", "-shm"))]
        assert {p.name: p.stat().st_mode & 0o777 for p in own} == {p.name: 0o600 for p in own}
        assert paths.local_jobs().stat().st_mode & 0o777 == 0o700
        store.engine.dispose()
        assert lock is not None
        lock.close()
        for path in own:
            if path.exists():
                path.chmod(0o640)
        paths.local_jobs().chmod(0o750)
        paths.prepare(True)  # what a daemon start does first
        assert [p for p in own if p.exists() and p.stat().st_mode & 0o077] == []
        assert paths.local_jobs().stat().st_mode & 0o777 == 0o700
    finally:
        os.umask(before)


def test_open_private_never_follows_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "victim").write_text("mine")
    (tmp_path / "daemon.lock").symlink_to(tmp_path / "victim")
    with pytest.raises(OSError):
        private.open_private(tmp_path / "daemon.lock")
    assert (tmp_path / "victim").read_text() == "mine"


def test_daemon_status_warns_when_the_state_dir_is_open_to_others(tmp_path: Path) -> None:
    h = Hpcdet(tmp_path / "user", "local")
    h.state.mkdir(mode=0o755)
    h.state.chmod(0o755)  # as an older hpcdet left it under umask 022
    out = h.run("daemon", "status", check=False).stdout
    assert f"warning: {h.state} is open to its group and every user (mode 0755)" in out, out
    assert f"chmod go= {h.state}" in out


def test_hpcdet_outside_site_packages_is_named_explicitly_and_still_isolated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As after ``pip install --user`` (which ``python -I`` does not see): an interpreter
    without hpcdet runs this copy of it by its path, and a planted package in the working
    directory or on PYTHONPATH still does not run."""
    bare = shutil.which("python3", path="/usr/bin:/bin")
    if bare is None or subprocess.run([bare, "-I", "-c", "import hpcdet"],
                                      capture_output=True, check=False).returncode == 0:
        pytest.skip("needs a python3 without hpcdet installed")
    monkeypatch.setattr(sys, "executable", bare)
    private._needs_explicit_root.cache_clear()
    try:
        cmd = private.hpcdet_command("hpcdet.processes")  # imports nothing outside stdlib
    finally:
        private._needs_explicit_root.cache_clear()
    assert cmd[:3] == [bare, "-I", "-c"]
    marker = tmp_path / "planted-ran"
    (tmp_path / "hpcdet").mkdir()
    (tmp_path / "hpcdet" / "__init__.py").write_text(f"open({str(marker)!r}, 'w')\n")
    # The planted package has no `processes`: had it been imported, the run would fail.
    done = subprocess.run(cmd, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(tmp_path)),
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()


def test_a_local_dir_base_the_user_chose_is_used_as_it_is(on_nfs: StatePaths) -> None:
    """``HPCDET_LOCAL_DIR`` naming the user's scratch (0755) or a sticky shared one like /tmp
    (1777): hpcdet's directory inside is private, the base keeps its mode."""
    base = on_nfs.local_dir().parent
    for mode in (0o755, 0o1777):
        base.mkdir(exist_ok=True)
        base.chmod(mode)
        process.acquire_lock(on_nfs).close()
        assert stat.S_IMODE(base.stat().st_mode) == mode
        assert stat.S_IMODE(on_nfs.local_dir().stat().st_mode) == 0o700


def test_a_local_dir_base_others_can_write_without_the_sticky_bit_is_refused(
    on_nfs: StatePaths,
) -> None:
    base = on_nfs.local_dir().parent
    base.mkdir()
    base.chmod(0o777)
    with pytest.raises(HpcdetError, match="no sticky bit"):
        process.acquire_lock(on_nfs)
    assert not on_nfs.local_dir().exists()
