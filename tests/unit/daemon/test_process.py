"""Starting the daemon process: what a failed start tells the user."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcdet.daemon import process
from hpcdet.errors import DaemonError
from hpcdet.paths import StatePaths


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
