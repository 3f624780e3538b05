from __future__ import annotations

from pathlib import Path

import pytest

from hpcdet import context
from hpcdet.errors import ContextError


def test_ignore_rules(tmp_path: Path) -> None:
    (tmp_path / "keep.py").write_text("x")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "big.bin").write_text("x")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.pyc").write_text("x")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / ".detignore").write_text("data/\n")
    (tmp_path / ".hpcdetignore").write_text("*.txt\n")
    assert context.select_files(tmp_path) == [Path("keep.py")]


def test_snapshot_copies(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "m.py").write_text("print(1)")
    files, size = context.snapshot(src, tmp_path / "dest")
    assert (files, size) == (1, 8)
    assert (tmp_path / "dest" / "pkg" / "m.py").read_text() == "print(1)"


def test_too_big_names_the_biggest_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(context, "MAX_CONTEXT_BYTES", 100)
    (tmp_path / "weights.pt").write_bytes(b"0" * 150)
    (tmp_path / "small.py").write_text("x")
    with pytest.raises(ContextError, match=r"(?s)95 MB limit.*weights\.pt.*\.detignore"):
        context.snapshot(tmp_path, tmp_path.parent / "out")


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ContextError, match="does not exist"):
        context.select_files(tmp_path / "nope")
