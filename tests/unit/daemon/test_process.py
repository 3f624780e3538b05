"""Starting the daemon process: what a failed start tells the user."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcdet import __version__
from hpcdet.errors import DaemonError
from hpcdet.paths import StatePaths
from hpcdet.protocol import process


def test_a_failed_start_shows_only_its_own_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cluster.yaml").write_text("backend: local\nnot_a_setting: 1\n")
    monkeypatch.setenv("HPCDET_CLUSTER_CONFIG", str(tmp_path / "cluster.yaml"))
    monkeypatch.setenv("HPCDET_SITE_CONFIG", str(tmp_path / "absent-site.yaml"))
    paths = StatePaths(tmp_path / "state")
    messages = []
    for _ in range(3):
        with pytest.raises(DaemonError, match="exited at start") as info:
            process.start(paths)
        messages.append(str(info.value))
    assert messages[0] == messages[2]
    assert messages[2].count("invalid cluster config") == 1


def test_a_daemon_that_dies_while_it_starts_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon takes the lock and writes its record, then dies while it catches up (here
    the first scheduler command kills it): the start fails, naming the exit."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sinfo = bin_dir / "sinfo"
    sinfo.write_text("#!/bin/sh\nsleep 1\nkill -9 $PPID\n")
    sinfo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    (tmp_path / "cluster.yaml").write_text("backend: slurm\n")
    (tmp_path / "site.yaml").write_text("{}\n")
    monkeypatch.setenv("HPCDET_CLUSTER_CONFIG", str(tmp_path / "cluster.yaml"))
    monkeypatch.setenv("HPCDET_SITE_CONFIG", str(tmp_path / "site.yaml"))
    paths = StatePaths(tmp_path / "state")
    with pytest.raises(DaemonError, match=r"exited at start \(code -9\)"):
        process.start(paths)
    assert not process.info(paths).alive


def test_a_daemon_of_another_version_is_named_only_while_it_runs() -> None:
    def info(record: dict[str, object], alive: bool = True) -> process.DaemonInfo:
        return process.DaemonInfo({"pid": 7, **record}, {}, alive, True)

    assert info({"version": __version__}).other_version() is None
    assert info({"version": "0.0.9"}, alive=False).other_version() is None
    said = info({"version": "0.0.9"}).other_version()
    assert said is not None and said.startswith(
        f"the daemon (pid 7) was started by hpcdet 0.0.9, and this is hpcdet {__version__}")
    assert "started by an earlier hpcdet" in str(info({}).other_version())
