"""Privacy on a shared login node, on the real Slurm (issue 9, items 1 and 2): a second
account reads nothing of the first user's and makes none of its processes run its code."""

from __future__ import annotations

from pathlib import Path

from tests import scenarios
from tests.support import Hpcdet


def test_another_user_reads_nothing_and_plants_nothing(
    users: dict[str, Hpcdet], open_tmp: Path
) -> None:
    scenarios.two_users(users["hpcdet-u1"], "hpcdet-u2", open_tmp)
