"""The model registry on the local backend (the scenario: tests/registry_scenarios.py)."""

from __future__ import annotations

from pathlib import Path

from tests.registry_scenarios import registered_checkpoints_outlive_gc_deletes_and_a_rebuild
from tests.support import Hpcdet


def test_registered_checkpoints_outlive_gc_deletes_and_a_rebuild(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    registered_checkpoints_outlive_gc_deletes_and_a_rebuild(local_hpcdet, tmp_path)
