"""The tutorial stages and the daemon's guarantees on the local backend (no Slurm needed)."""

from __future__ import annotations

from pathlib import Path

from tests import scenarios
from tests.support import Hpcdet


def test_stage0(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.stage0(local_hpcdet, tmp_path)


def test_stage1_metrics(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.stage1(local_hpcdet, tmp_path)


def test_stage2_checkpoints(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.stage2(local_hpcdet, tmp_path)


def test_pause_and_activate_resume_from_checkpoint(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.pause_activate(local_hpcdet, tmp_path)


def test_bad_config_reports_everything(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.bad_config(local_hpcdet, tmp_path)


def test_hostile_values_execute_nothing(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.hostile_values(local_hpcdet, tmp_path)


def test_metrics_exact_after_daemon_sigkills(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.metrics_survive_daemon_kills(local_hpcdet, tmp_path)


def test_database_on_local_disk_and_rebuilt_from_run_tree(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    scenarios.rebuild_on_network_fs(local_hpcdet, tmp_path)
