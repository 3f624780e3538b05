"""Trials in an image on the local backend, against the Apptainer double: the registry's faults
and site images, which no real runtime can stage here (tests/integration/test_runtimes.py runs
the real ones)."""

from __future__ import annotations

from pathlib import Path

from tests import container_scenarios
from tests.support import Hpcdet, Images


def test_a_failed_pull_and_a_missing_runtime_end_the_trial(
        local_image_hpcdet: Hpcdet, images: Images, container_root: Path) -> None:
    container_scenarios.errors_a_user_can_act_on(local_image_hpcdet, container_root / "t",
                                                 images)


def test_a_site_image_directory_is_used_as_it_is(
        local_image_hpcdet: Hpcdet, images: Images, container_root: Path) -> None:
    container_scenarios.site_images_are_used_as_they_are(local_image_hpcdet,
                                                         container_root / "t", images)
