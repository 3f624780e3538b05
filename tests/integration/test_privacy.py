"""Privacy on a shared machine, on the local backend (issue 9, items 1 and 2)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import scenarios
from tests.support import Hpcdet, ensure_user, python_for_users

USER_A, USER_B = "hpcdet-pa", "hpcdet-pb"


def test_everything_private_under_umask_022(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.private_under_umask_022(local_hpcdet, tmp_path)


def test_shared_with_group_readable_by_it_only(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.shared_with_group(local_hpcdet, tmp_path)


def _root_or_skip() -> None:
    if os.geteuid() != 0:
        reason = "the two-user test creates accounts: run it as root"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def users_python() -> Iterator[str]:
    _root_or_skip()
    base = Path(tempfile.mkdtemp(prefix="hpcdet-users-", dir="/tmp"))
    python = python_for_users(base)
    if python is None:
        pytest.fail("cannot build a Python for unprivileged users (see stderr)", pytrace=False)
    yield python
    shutil.rmtree(base, ignore_errors=True)


def test_another_user_reads_nothing_and_plants_nothing(users_python: str) -> None:
    for name in (USER_A, USER_B):
        ensure_user(name)
    tmp = Path(tempfile.mkdtemp(prefix="hpcdet-test-", dir="/tmp"))
    tmp.chmod(0o755)
    try:
        a = Hpcdet(tmp / USER_A, "local", user=USER_A, python=users_python)
        scenarios.two_users(a, USER_B, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_an_unreadable_run_directory_stalls_only_its_experiment(users_python: str) -> None:
    """Issue 37 as the tester did it: chmod 000 on one run's directory, under a daemon that
    runs as an unprivileged user (root's would read it all the same)."""
    ensure_user(USER_A)
    tmp = Path(tempfile.mkdtemp(prefix="hpcdet-test-", dir="/tmp"))
    tmp.chmod(0o755)
    a = Hpcdet(tmp / USER_A, "local", user=USER_A, python=users_python)
    try:
        scenarios.unreadable_run_is_its_experiments_fault(a, a.mkdir(tmp / "work"))
    finally:
        a.stop()
        shutil.rmtree(tmp, ignore_errors=True)
