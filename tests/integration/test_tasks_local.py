"""Interactive tasks on the local backend: a command and a shell (the Slurm tests run the
same scenarios on the cluster, with JupyterLab in Chromium)."""

from __future__ import annotations

import socket
from pathlib import Path

from tests import task_scenarios
from tests.support import Hpcdet

HERE = {socket.gethostname()}


def test_a_command_prints_and_exits_with_its_code(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    task_scenarios.command_runs(local_hpcdet, tmp_path, HERE)


def test_a_shell_joins_its_allocation_through_a_terminal(local_hpcdet: Hpcdet,
                                                         tmp_path: Path) -> None:
    task_scenarios.shell_joins(local_hpcdet, tmp_path, HERE)
