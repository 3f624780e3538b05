from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtimes import USER, Runtime, require_runtimes
from tests.support import (
    CONTAINER_TESTS_ROOT,
    Hpcdet,
    Images,
    ensure_user,
    python_for_users,
    require_root,
)


@pytest.fixture
def local_hpcdet(tmp_path: Path) -> Iterator[Hpcdet]:
    h = Hpcdet(tmp_path / "user", "local")
    yield h
    h.stop()


@pytest.fixture
def container_root() -> Iterator[Path]:
    """A directory outside /tmp (each container has its own /tmp) for hpcdet's state."""
    CONTAINER_TESTS_ROOT.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(dir=CONTAINER_TESTS_ROOT))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def user_python() -> Iterator[str]:
    """A Python with hpcdet installed that unprivileged users can run: the test environment
    may live where they cannot read (root's home), so hpcdet is installed from this checkout
    into a venv of Debian's python3 in a world-readable directory."""
    require_root("a Python for unprivileged users")
    base = Path(tempfile.mkdtemp(prefix="hpcdet-users-", dir="/tmp"))
    python = python_for_users(base)
    if python is None:
        pytest.fail("cannot build a Python for unprivileged users (see stderr)", pytrace=False)
    yield python
    shutil.rmtree(base, ignore_errors=True)


def runtime_hpcdet(rt: Runtime, backend: str, root: Path, request: pytest.FixtureRequest
                   ) -> Hpcdet:
    """hpcdet on ``backend`` whose trials run in ``rt``, as root or as the unprivileged user
    (``root`` is made traversable for them)."""
    require_runtimes()
    if not rt.rootless:
        return Hpcdet(root / "user", backend)
    require_root("running a runtime as an unprivileged user")
    ensure_user(USER)
    root.chmod(0o755)
    python = request.getfixturevalue("user_python")
    return Hpcdet(root / "user", backend, user=USER, python=python)


@pytest.fixture
def images(container_root: Path) -> Images:
    return Images(container_root / "images")


@pytest.fixture
def local_image_hpcdet(container_root: Path, images: Images) -> Iterator[Hpcdet]:
    """hpcdet on the local backend, with the Apptainer double on PATH."""
    h = Hpcdet(container_root / "user", "local", extra_env=images.env())
    yield h
    h.stop()
