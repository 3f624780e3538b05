"""The model registry on the two-node Slurm, through the CLI and the SDK (the scenario:
tests/registry_scenarios.py); the trial that writes the checkpoints runs in a Slurm job."""

from __future__ import annotations

from pathlib import Path

from tests.registry_scenarios import registered_checkpoints_outlive_gc_deletes_and_a_rebuild
from tests.support import Hpcdet


def test_registered_checkpoints_outlive_gc_deletes_and_a_rebuild(
    slurm_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    registered_checkpoints_outlive_gc_deletes_and_a_rebuild(slurm_hpcdet, tmp_path)
