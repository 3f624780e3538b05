"""Privacy on a shared machine, on the local backend (issue 9, items 1 and 2)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import scenarios
from tests.support import Hpcdet, ensure_user, python_for_users

USER_A, USER_B = "hpcdet-pa", "hpcdet-pb"
GROUP = "hpcdet-pg"


def test_everything_private_under_umask_022(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.private_under_umask_022(local_hpcdet, tmp_path)


def _root_or_skip() -> None:
    if os.geteuid() != 0:
        reason = "the two-user test creates accounts: run it as root"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


def test_shared_with_group_readable_by_it_only() -> None:
    """A real member of the group the state is shared with reads the run tree, and cannot
    open the daemon's database, locks or local jobs, nor block the daemon (issue 37)."""
    _root_or_skip()
    ensure_user(USER_B)
    subprocess.run(["groupadd", "-f", GROUP], check=True, capture_output=True)
    subprocess.run(["usermod", "-aG", GROUP, USER_B], check=True, capture_output=True)
    tmp = Path(tempfile.mkdtemp(prefix="hpcdet-test-", dir="/tmp"))
    tmp.chmod(0o755)  # the member can reach the state directory
    h = Hpcdet(tmp / "owner", "local")
    h.root.chmod(0o755)
    try:
        scenarios.shared_with_group(h, tmp, group=GROUP, member=USER_B)
    finally:
        h.stop()
        shutil.rmtree(tmp, ignore_errors=True)


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
