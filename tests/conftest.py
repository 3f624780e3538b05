from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import CONTAINER_TESTS_ROOT, Hpcdet, Images


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


@pytest.fixture
def images(container_root: Path) -> Images:
    return Images(container_root / "images")


@pytest.fixture
def local_image_hpcdet(container_root: Path, images: Images) -> Iterator[Hpcdet]:
    """hpcdet on the local backend, with the Apptainer double on PATH."""
    h = Hpcdet(container_root / "user", "local", extra_env=images.env())
    yield h
    h.stop()
