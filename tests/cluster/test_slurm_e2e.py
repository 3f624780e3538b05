"""The tutorial stages and the daemon's guarantees on the real two-node Slurm cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import scenarios
from tests.cluster.conftest import require_module
from tests.support import Hpcdet


def test_stage0(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.stage0(slurm_hpcdet, tmp_path)


def test_stage1_metrics(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.stage1(slurm_hpcdet, tmp_path)


def test_stage2_checkpoints(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.stage2(slurm_hpcdet, tmp_path)


def test_pause_and_activate_resume_from_checkpoint(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.pause_activate(slurm_hpcdet, tmp_path)


def test_hostile_values_execute_nothing(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.hostile_values(slurm_hpcdet, tmp_path)


def test_metrics_exact_after_daemon_sigkills(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.metrics_survive_daemon_kills(slurm_hpcdet, tmp_path)


def test_one_status_query_per_tick(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.one_status_query_per_tick(slurm_hpcdet, tmp_path)


def test_database_on_local_disk_and_rebuilt_from_run_tree(
    slurm_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    scenarios.rebuild_on_network_fs(slurm_hpcdet, tmp_path)


def test_kill_running_experiment(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.kill_running_experiment(slurm_hpcdet, tmp_path)


def test_failing_trial_uses_up_max_restarts(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.failing_trial_restarts(slurm_hpcdet, tmp_path)


def test_preemption_signal_from_slurm_resumes(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.preempt_through_slurm_signal(slurm_hpcdet, tmp_path)


def test_trial_longer_than_walltime_completes_across_jobs(
    slurm_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    scenarios.longer_than_walltime(slurm_hpcdet, tmp_path)


@pytest.mark.exclusive
def test_node_failure_resubmits_from_checkpoint(
    slurm_cluster: Any, slurm_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    scenarios.node_failure(slurm_hpcdet, tmp_path, slurm_cluster.script)


def test_stage4_distributed_over_two_nodes(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.stage4(slurm_hpcdet, tmp_path)


def test_distributed_preemption_signal_resumes(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.preempt_through_slurm_signal(
        slurm_hpcdet, tmp_path, config="4_distributed.yaml", per_step=8
    )


def test_killing_one_rank_restarts_the_trial(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.kill_one_rank(slurm_hpcdet, tmp_path)


@pytest.mark.parametrize("config", ["ddp.yaml", "ddp_determined.yaml"])
def test_torch_ddp_two_nodes(slurm_hpcdet: Hpcdet, tmp_path: Path, config: str) -> None:
    require_module("torch")
    scenarios.ddp(slurm_hpcdet, tmp_path, config)


def test_request_that_never_fits_is_refused(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.never_fits(slurm_hpcdet, tmp_path)


def test_the_mpi_launcher_over_two_nodes(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    from tests import container_scenarios

    out = container_scenarios.mpi_over_two_nodes(slurm_hpcdet, tmp_path)
    assert "image=-" in out


def test_the_sdk_creates_waits_reads_and_downloads_on_slurm(
    slurm_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    scenarios.sdk_notebook(slurm_hpcdet, tmp_path)
