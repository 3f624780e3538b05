from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.remote_support import Laptop
from tests.runtimes import USER, Runtime, require_runtimes
from tests.support import (
    CONTAINER_TESTS_ROOT,
    REPO,
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
def user_python() -> str:
    """A Python with hpcdet installed that unprivileged users can run: the test environment
    may live where they cannot read (root's home), so hpcdet is installed from this checkout
    into a venv of Debian's python3 in a world-readable directory. Built once for each state
    of the source (pip takes half a minute) and shared by the test workers and runs."""
    import fcntl
    import hashlib

    require_root("a Python for unprivileged users")
    digest = hashlib.sha256()
    for path in sorted(p for d in ("hpcdet", "cli", "launchers") for p in (REPO / d).rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    digest.update((REPO / "pyproject.toml").read_bytes())
    base = Path(tempfile.gettempdir()) / f"hpcdet-users-{digest.hexdigest()[:16]}"
    with open(Path(tempfile.gettempdir()) / "hpcdet-users.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        python = base / "venv" / "bin" / "python"
        if (base / "built").exists():
            return str(python)
        # Builds for other sources only: 16 hex digits, as named above (a test's own
        # temporary directory by a like prefix is not this cache's to remove).
        for old in Path(tempfile.gettempdir()).glob("hpcdet-users-" + "[0-9a-f]" * 16):
            shutil.rmtree(old, ignore_errors=True)
        base.mkdir()
        built = python_for_users(base)
        if built is None:
            pytest.fail("cannot build a Python for unprivileged users (see stderr)",
                        pytrace=False)
        (base / "built").write_text("")
        return built


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


@pytest.fixture
def laptop(local_hpcdet: Hpcdet, tmp_path: Path) -> Iterator[tuple[Laptop, Hpcdet]]:
    """A laptop whose cluster ``x`` is ``local_hpcdet`` behind a real sshd."""
    from tests.remote_support import laptop_for

    with laptop_for(local_hpcdet, tmp_path) as lap:
        yield lap, local_hpcdet



# JupyterLab for the notebook tests: the user's own, in a trial environment of its own.
JUPYTERLAB = "jupyterlab>=4,<5"


@pytest.fixture(scope="session")
def jupyter_python() -> str:
    """A Python with JupyterLab from PyPI (and nothing of hpcdet's: trials import hpcdet's
    trial side from its own tree), world-readable so that compute nodes and other users can
    run it; built once per machine and version pin (pip takes about 20 s)."""
    import fcntl
    import hashlib
    import subprocess

    base = Path(tempfile.gettempdir()) / (
        "hpcdet-jupyter-" + hashlib.sha256(JUPYTERLAB.encode()).hexdigest()[:12])
    python = base / "venv" / "bin" / "python"
    with open(Path(tempfile.gettempdir()) / "hpcdet-jupyter.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (base / "built").exists():
            return str(python)
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(mode=0o755)
        system = shutil.which("python3", path="/usr/bin:/bin") or "python3"
        for cmd in ([system, "-m", "venv", str(base / "venv")],
                    [str(python), "-m", "pip", "install", "-q", JUPYTERLAB]):
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                                  check=False)
            if done.returncode != 0:
                pytest.fail(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}",
                            pytrace=False)
        (base / "built").write_text("")
        return str(python)
