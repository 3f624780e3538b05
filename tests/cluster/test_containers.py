"""Trials in an image on the two-node Slurm, against the Apptainer double on the nodes' PATH: one
pull shared by an array's tasks, which needs a registry (tests/cluster/test_runtimes.py runs
the real runtimes)."""

from __future__ import annotations

from pathlib import Path

from tests import container_scenarios
from tests.support import Hpcdet, Images


def test_ten_array_tasks_share_one_pull(
        slurm_image_hpcdet: Hpcdet, images: Images, container_root: Path) -> None:
    container_scenarios.one_pull_for_a_whole_array(slurm_image_hpcdet, container_root / "t",
                                                   images)
