"""Packing on the local backend: a trial longer than its allocation's walltime."""

from __future__ import annotations

from pathlib import Path

from tests import packing_scenarios
from tests.support import Hpcdet


def test_a_trial_goes_on_in_the_next_allocation_at_the_walltime(local_hpcdet: Hpcdet,
                                                                 tmp_path: Path) -> None:
    packing_scenarios.across_allocations(local_hpcdet, tmp_path)
