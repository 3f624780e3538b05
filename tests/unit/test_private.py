"""Directories hpcdet owns, and what hpcdet's own processes import (issue 9, item 1)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcdet.daemon import process
from hpcdet.errors import HpcdetError
from hpcdet.paths import StatePaths

OTHER_UID = 54321  # no such account needed: only root can give a file to another uid
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


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
