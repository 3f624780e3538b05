"""Packed searches on the real two-node Slurm (tests/packing_scenarios.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import packing_scenarios
from tests.support import Hpcdet, slurm_jobs_under


@pytest.fixture
def plain_hpcdet(slurm_hpcdet: Hpcdet, tmp_path: Path) -> Iterator[Hpcdet]:
    """A second user state on the same cluster, for the search run one job per trial."""
    h = Hpcdet(tmp_path / "plain", "slurm")
    yield h
    h.stop()
    left = slurm_jobs_under(h.root)
    if left:
        import subprocess

        subprocess.run(["scancel", *left], check=False)


def test_a_packed_asha_search_decides_as_one_job_per_trial(
        slurm_hpcdet: Hpcdet, plain_hpcdet: Hpcdet, tmp_path: Path) -> None:
    packing_scenarios.same_decisions_as_one_job_per_trial(slurm_hpcdet, plain_hpcdet, tmp_path)


def test_a_killed_allocations_trials_go_on_from_their_checkpoints(
        slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    packing_scenarios.killed_allocation(slurm_hpcdet, tmp_path, ["scancel"])
