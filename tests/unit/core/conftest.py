"""Fixtures: this process as a trial of a fake run, or off-cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcdet.rundir.spec import CLUSTER_INFO_ENV
from tests.unit.core.core_fakes import FakeRun, make_run


@pytest.fixture
def fake_run(tmp_path: Path) -> FakeRun:
    return make_run(tmp_path)


@pytest.fixture
def on_cluster(fake_run: FakeRun, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRun]:
    """This process is a trial of ``fake_run``."""
    monkeypatch.setenv(CLUSTER_INFO_ENV, str(fake_run.info_path))
    yield fake_run


@pytest.fixture
def off_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No cluster info; default checkpoint storage under ``tmp_path``."""
    monkeypatch.delenv(CLUSTER_INFO_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data" / "hpcdet" / "checkpoints"
