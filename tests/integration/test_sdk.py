"""The SDK on the login node (issue 14): a notebook-style script creates an experiment,
waits for it, reads its metrics and downloads its best checkpoint, on the local backend."""

from __future__ import annotations

from pathlib import Path

from tests.scenarios import sdk_notebook
from tests.support import Hpcdet


def test_a_notebook_creates_waits_reads_metrics_and_downloads_the_best_checkpoint(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    sdk_notebook(local_hpcdet, tmp_path)
