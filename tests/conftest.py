from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import Hpcdet


@pytest.fixture
def local_hpcdet(tmp_path: Path) -> Iterator[Hpcdet]:
    h = Hpcdet(tmp_path / "user", "local")
    yield h
    h.stop()
