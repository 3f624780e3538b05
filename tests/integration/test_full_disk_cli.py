"""`hpcdet experiment create` on a full disk (issue 9, item 10), through the real CLI."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.full_disk import mount_small_fs
from tests.support import EXAMPLES, Hpcdet


@pytest.fixture
def full_state(local_hpcdet: Hpcdet) -> Iterator[Hpcdet]:
    for _ in mount_small_fs(local_hpcdet.state, size="1m"):
        yield local_hpcdet


def test_create_that_runs_out_of_space_copying_the_context_says_so_and_leaves_nothing(
    full_state: Hpcdet, tmp_path: Path
) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "0_start.py").write_text((EXAMPLES / "0_start.py").read_text())
    (context / "data.bin").write_bytes(os.urandom(2 << 20))  # twice the free space
    p = full_state.run("experiment", "create", str(EXAMPLES / "0_start.yaml"), str(context),
                       check=False)
    assert p.returncode == 1, p
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith("Error: experiment not created: no space left on device while "
                               f"writing the request and context snapshot in "
                               f"{full_state.state / 'requests'}; free space"), p.stderr
    assert list(full_state.state.glob("runs/exp-*")) == []
    assert list((full_state.state / "requests").iterdir()) == []
