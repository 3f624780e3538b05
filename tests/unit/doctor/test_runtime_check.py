"""The container runtime and image cache findings on this node."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcdet.doctor import runtime_check
from hpcdet.doctor.findings import Status
from hpcdet.schedulers.runner import CommandRunner


def test_a_runtime_not_on_path_fails_when_chosen_and_warns_by_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    chosen, path = runtime_check.runtime("enroot", True, CommandRunner())
    assert (chosen.status, path) == (Status.FAIL, "")
    assert chosen.seen == "enroot not found on PATH"
    assert "container_runtime:" in chosen.change
    default, _ = runtime_check.runtime("apptainer", False, CommandRunner())
    assert default.status is Status.WARN and "(the default runtime)" in default.seen


def test_image_cache_space_and_temporary_directories(tmp_path: Path) -> None:
    found = runtime_check.image_dirs(tmp_path / "images", {"APPTAINER_TMPDIR": "/scratch/t"})
    assert found.status in (Status.OK, Status.WARN)  # WARN only on a nearly full disk
    assert f"image cache {tmp_path / 'images'} (" in found.seen
    assert found.seen.endswith("temporary: APPTAINER_TMPDIR=/scratch/t")
