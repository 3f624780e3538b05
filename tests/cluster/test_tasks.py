"""Interactive tasks on the real two-node Slurm: a command, a shell joined with
`srun --overlap` through a pseudo-terminal, a shell beside a running trial, and JupyterLab
from PyPI in a real headless Chromium through the door, ended by its idle timeout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import task_scenarios
from tests.cluster.conftest import SlurmTestCluster
from tests.support import REPO, Hpcdet

SHOTS = REPO / "test-artifacts" / "ui"


def test_a_command_runs_on_a_node(slurm_hpcdet: Hpcdet, slurm_cluster: SlurmTestCluster,
                                  tmp_path: Path) -> None:
    task_scenarios.command_runs(slurm_hpcdet, tmp_path, slurm_cluster.nodes)


def test_a_shell_joins_its_allocation(slurm_hpcdet: Hpcdet, slurm_cluster: SlurmTestCluster,
                                      tmp_path: Path) -> None:
    task_scenarios.shell_joins(slurm_hpcdet, tmp_path, slurm_cluster.nodes)


def test_a_trial_shell_is_inside_the_trials_job(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    task_scenarios.trial_shell(slurm_hpcdet, tmp_path, "SLURM_JOB_ID")


def test_a_notebook_through_the_door_until_its_idle_timeout(
        slurm_hpcdet: Hpcdet, slurm_cluster: SlurmTestCluster, tmp_path: Path,
        jupyter_python: Any) -> None:
    task_scenarios.notebook_in_chromium(slurm_hpcdet, tmp_path, jupyter_python,
                                        slurm_cluster.nodes, SHOTS)
