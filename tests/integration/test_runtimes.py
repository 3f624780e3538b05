"""Trials in an image on the local backend, on the real runtimes (scripts/container-runtimes.sh):
Apptainer as an unprivileged user and as root, Podman rootless and rootful, Docker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import runtime_scenarios
from tests.conftest import runtime_hpcdet
from tests.runtimes import ALL, Runtime
from tests.support import Hpcdet


@pytest.fixture(params=ALL, ids=lambda rt: rt.id)
def runtime(request: pytest.FixtureRequest) -> Runtime:
    rt: Runtime = request.param
    return rt


@pytest.fixture
def local_runtime_hpcdet(runtime: Runtime, container_root: Path,
                         request: pytest.FixtureRequest) -> Iterator[Hpcdet]:
    h = runtime_hpcdet(runtime, "local", container_root, request)
    yield h
    h.stop()


def test_binds_variables_and_the_hook_reach_the_trial_and_its_files_are_the_users(
        local_runtime_hpcdet: Hpcdet, runtime: Runtime, container_root: Path) -> None:
    runtime_scenarios.what_reaches_the_trial(local_runtime_hpcdet, runtime, container_root)


def test_a_missing_image_or_command_ends_the_trial_with_the_runtimes_words(
        local_runtime_hpcdet: Hpcdet, runtime: Runtime, container_root: Path) -> None:
    runtime_scenarios.failures_end_the_trial_at_once(local_runtime_hpcdet, runtime,
                                                     container_root)


@pytest.mark.parametrize("runtime", [rt for rt in ALL if rt.rootless or rt.name == "docker"],
                         ids=lambda rt: rt.id, indirect=True)
def test_pause_and_resume_from_a_checkpoint_written_in_the_container(
        local_runtime_hpcdet: Hpcdet, runtime: Runtime, container_root: Path) -> None:
    runtime_scenarios.pause_and_resume(local_runtime_hpcdet, runtime, container_root)


@pytest.mark.parametrize("runtime", [rt for rt in ALL if rt.name in ("podman", "docker")
                                     and not rt.rootless], ids=lambda rt: rt.id, indirect=True)
def test_a_killed_trial_leaves_no_container_behind(
        local_runtime_hpcdet: Hpcdet, runtime: Runtime, container_root: Path) -> None:
    runtime_scenarios.killed_trial_leaves_no_container(local_runtime_hpcdet, runtime,
                                                       container_root)
