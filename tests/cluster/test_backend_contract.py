"""The scheduler contract (tests/backend_contract.py) on the real two-node Slurm."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hpcdet.schedulers.runner import CommandRunner
from hpcdet.schedulers.slurm import SlurmScheduler
from tests.backend_contract import CONTRACT, Backend


@pytest.mark.parametrize("check", CONTRACT, ids=lambda c: c.__name__)
def test_contract(slurm_cluster: Any, tmp_path: Path, check: Callable[[Backend], None]) -> None:
    check(Backend(SlurmScheduler(), CommandRunner(), tmp_path))
