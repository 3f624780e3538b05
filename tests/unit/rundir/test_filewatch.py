"""A control file's changes noticed (hpcdet.rundir.filewatch)."""

from __future__ import annotations

import json
from pathlib import Path

from hpcdet.rundir.atomic import write_atomic
from hpcdet.rundir.filewatch import FileWatch


def test_write_atomic_and_filewatch(tmp_path: Path) -> None:
    path = tmp_path / "control.json"
    watch = FileWatch(path)
    assert not watch.changed()
    write_atomic(path, {"preempt": False})
    assert watch.changed() and not watch.changed()
    write_atomic(path, {"preempt": True})
    assert watch.changed()
    assert json.loads(path.read_text()) == {"preempt": True}
    assert [p.name for p in tmp_path.iterdir()] == ["control.json"]
