"""Hyperparameter searches on the real two-node Slurm cluster, trials in job arrays."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import scenarios
from tests.support import Hpcdet


def test_asha_v037_promotions_in_one_array(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    d = scenarios.asha_v037(slurm_hpcdet, tmp_path)
    assert len(d["arrays"]) == 1 and d["arrays"][0]["count"] == 10  # type: ignore[index]


def test_asha_v038_stops_in_one_array(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    d = scenarios.asha_v038(slurm_hpcdet, tmp_path)
    assert len(d["arrays"]) == 1 and d["arrays"][0]["count"] == 10  # type: ignore[index]


def test_asha_survives_daemon_sigkills(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.asha_v037(slurm_hpcdet, tmp_path, kill_daemon=True)


def test_random_100_trials_4_at_a_time_one_sbatch(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.random_throttled(slurm_hpcdet, tmp_path)


def test_checkpoint_gc(slurm_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.checkpoint_gc(slurm_hpcdet, tmp_path)


@pytest.fixture
def small_max_array_size(slurm_cluster: Any) -> Iterator[None]:
    script = str(slurm_cluster.script)
    env = {"HPCDET_TEST_MAX_ARRAY_SIZE": "50", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    subprocess.run(["bash", script, "start"], env=env, check=True, capture_output=True)
    yield
    subprocess.run(["bash", script, "start"], env={"PATH": env["PATH"]}, check=True,
                   capture_output=True)


@pytest.mark.exclusive
def test_max_array_size_splits_the_search(
    small_max_array_size: None, slurm_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    scenarios.split_arrays(slurm_hpcdet, tmp_path)


@pytest.mark.parametrize(
    "searcher",
    ["{name: single, metric: x, max_length: 1}",
     "{name: random, metric: x, max_trials: 5, max_length: 1}"],
)
def test_refused_submission_shows_the_schedulers_reason(
    slurm_hpcdet: Hpcdet, tmp_path: Path, searcher: str
) -> None:
    scenarios.refused_submission(slurm_hpcdet, tmp_path, searcher)


def test_max_slots_throttles_the_array_and_caps_what_runs(
    slurm_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    most, throttles = scenarios.max_slots(slurm_hpcdet, tmp_path, cap=2, trials=5)
    assert throttles == [2] and most == 2, (most, throttles)


def test_a_killed_search_leaves_no_task_behind_even_with_the_daemon_gone(
    slurm_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    """Killing a throttled search and stopping the daemon at once: Slurm would start the
    array's pending tasks as the running ones go, and without the daemon they would wait for
    a trial for ever, holding their nodes. The kill cancels the array itself and closes it."""
    h = slurm_hpcdet
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    cfg = tmp_path / "long.yaml"
    cfg.write_text("name: long\nentrypoint: sleep 600\nmax_restarts: 0\n"
                   "hyperparameters: {x: {type: int, minval: 1, maxval: 9}}\n"
                   "searcher: {name: random, metric: x, max_trials: 12, "
                   "max_concurrent_trials: 2, max_length: 1}\n")
    exp_id = h.create(cfg, ctx)
    h.wait_for("the array", lambda: bool(h.describe(exp_id)["arrays"]), timeout=60)
    array = str(h.describe(exp_id)["arrays"][0]["job_id"])

    def array_tasks(state: str) -> list[str]:
        # By job id: tests running beside this one have arrays of the same name.
        out = subprocess.run(["squeue", "--noheader", "--array", "-t", state, "-j", array,
                              "-o", "%i"], capture_output=True, text=True).stdout
        return out.split()

    h.wait_for("two tasks to run", lambda: len(array_tasks("RUNNING")) == 2, timeout=120)
    h.run("experiment", "kill", str(exp_id))
    h.run("daemon", "stop")
    h.wait_for("every task of the array to go",
               lambda: not array_tasks("PENDING,RUNNING,COMPLETING"), timeout=60)
    assert (h.state / "runs" / f"exp-{exp_id}" / "array" / "closed").exists()
