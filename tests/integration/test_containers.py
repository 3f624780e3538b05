"""Trials in an image on the local backend, against the Apptainer double."""

from __future__ import annotations

from pathlib import Path

from tests import container_scenarios
from tests.support import Hpcdet, Images


def test_the_trial_sees_what_a_cleanenv_container_gives(
        local_image_hpcdet: Hpcdet, images: Images, container_root: Path) -> None:
    local_image_hpcdet.extra_env["LEAKY_HOST_VAR"] = "the job's, not the container's"
    container_scenarios.inside_the_image(local_image_hpcdet, container_root / "t", images, "")


def test_missing_runtime_missing_image_and_failed_pull_end_the_trial(
        local_image_hpcdet: Hpcdet, images: Images, container_root: Path) -> None:
    container_scenarios.errors_a_user_can_act_on(local_image_hpcdet, container_root / "t",
                                                 images)


def test_a_site_image_directory_is_used_as_it_is(
        local_image_hpcdet: Hpcdet, images: Images, container_root: Path) -> None:
    container_scenarios.site_images_are_used_as_they_are(local_image_hpcdet,
                                                         container_root / "t", images)
