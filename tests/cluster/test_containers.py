"""Trials in an image on the two-node Slurm, against the Apptainer double on the nodes' PATH."""

from __future__ import annotations

from pathlib import Path

from tests import container_scenarios
from tests.support import Hpcdet, Images


def test_the_trial_sees_what_a_cleanenv_container_gives(
        slurm_image_hpcdet: Hpcdet, images: Images, container_root: Path) -> None:
    slurm_image_hpcdet.extra_env["LEAKY_HOST_VAR"] = "the job's, not the container's"
    facts = container_scenarios.inside_the_image(slurm_image_hpcdet, container_root / "t",
                                                 images, "SLURM_")
    assert "SLURM_JOB_ID" in facts["env"]


def test_the_tutorial_runs_in_an_image(
        slurm_image_hpcdet: Hpcdet, images: Images, container_root: Path) -> None:
    container_scenarios.tutorial_in_an_image(slurm_image_hpcdet, container_root / "t", images)


def test_ten_array_tasks_share_one_pull(
        slurm_image_hpcdet: Hpcdet, images: Images, container_root: Path) -> None:
    container_scenarios.one_pull_for_a_whole_array(slurm_image_hpcdet, container_root / "t",
                                                   images)


def test_torch_distributed_runs_its_workers_in_the_image_on_two_nodes(
        slurm_image_hpcdet: Hpcdet, images: Images, container_root: Path,
        torch_image: Path) -> None:
    container_scenarios.ddp_in_an_image(slurm_image_hpcdet, container_root / "t", images,
                                        torch_image)


def test_the_mpi_launcher_starts_its_step_on_the_host_and_ranks_in_the_image(
        slurm_image_hpcdet: Hpcdet, images: Images, container_root: Path,
        torch_image: Path) -> None:
    out = container_scenarios.mpi_over_two_nodes(slurm_image_hpcdet, container_root / "t",
                                                 images, torch_image)
    assert out.count("image=/") == 4, out
    # One container for each node's harness, one for each rank; the step itself ran outside.
    execs = images.calls("exec")
    assert len(execs) == 2 + 4, [c["argv"][:3] for c in execs]
    runs = slurm_image_hpcdet.state / "runs" / "exp-1" / "trials" / "1" / "run-1"
    assert (runs / "launch" / "mpi-0" / "host-step.exit").exists()
