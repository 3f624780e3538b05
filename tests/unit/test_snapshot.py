from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcdet import snapshot
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
    assert snapshot.select_files(tmp_path) == [Path("keep.py")]


def test_snapshot_copies(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "m.py").write_text("print(1)")
    files, size = snapshot.snapshot(src, tmp_path / "dest")
    assert (files, size) == (1, 8)
    assert (tmp_path / "dest" / "pkg" / "m.py").read_text() == "print(1)"


def test_too_big_names_the_biggest_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "MAX_CONTEXT_BYTES", 100)
    (tmp_path / "weights.pt").write_bytes(b"0" * 150)
    (tmp_path / "small.py").write_text("x")
    with pytest.raises(ContextError, match=r"(?s)95 MB limit.*weights\.pt.*\.detignore"):
        snapshot.snapshot(tmp_path, tmp_path.parent / "out")


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ContextError, match="does not exist"):
        snapshot.select_files(tmp_path / "nope")


def _tree(tmp_path: Path) -> Path:
    """A context with every kind of entry the snapshot decides about."""
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "m.py").write_text("m")
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "data.txt").write_text("data")
    (outside / "f.py").write_text("f")
    (src / "linked_file.py").symlink_to(outside / "f.py")
    (src / "linked_dir").symlink_to(outside)
    (src / "inner_link").symlink_to("pkg")
    (src / "pkg" / "loop").symlink_to("..")
    (src / "self").symlink_to(".")
    (src / "dangling").symlink_to(tmp_path / "nowhere")
    (src / "cycle_a").symlink_to("cycle_b")
    (src / "cycle_b").symlink_to("cycle_a")
    os.mkfifo(src / "fifo")
    return src


def test_symlinks_are_followed_and_what_cannot_be_copied_is_named(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    warnings: list[str] = []
    files, size = snapshot.snapshot(src, tmp_path / "dest", warn=warnings.append)
    dest = tmp_path / "dest"
    copied = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert copied == ["inner_link/m.py", "linked_dir/f.py", "linked_dir/sub/data.txt",
                      "linked_file.py", "pkg/m.py"]
    assert (files, size) == (5, 8)
    assert not any(p.is_symlink() for p in dest.rglob("*"))
    assert (dest / "linked_file.py").read_text() == "f"
    said = "\n".join(warnings)
    for name, why in [("cycle_a", "symlink to nothing"), ("cycle_b", "symlink to nothing"),
                      ("dangling", "symlink to nothing"), ("fifo", "FIFO"),
                      ("inner_link/loop", "loop"), ("pkg/loop", "loop"), ("self", "loop")]:
        assert f"skipped '{name}' in the context: " in said and why in said, name
    assert len(warnings) == 7


def test_an_unreadable_directory_is_named(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("x")
    (tmp_path / "private").mkdir()

    def denied(path: object) -> object:
        raise PermissionError(13, "Permission denied")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(snapshot.os, "scandir", denied)
        with pytest.raises(ContextError, match=r"cannot read '\.' in .*\.detignore"):
            snapshot.snapshot(tmp_path, tmp_path.parent / "out")


@pytest.mark.parametrize("pattern", ["!", "\\", "[z-a]", "data\\"])
def test_an_invalid_ignore_pattern_is_named_with_its_line(tmp_path: Path, pattern: str) -> None:
    (tmp_path / "a.py").write_text("x")
    (tmp_path / ".detignore").write_text(f"*.pyc\n{pattern}\n")
    with pytest.raises(ContextError, match=r"\.detignore, line 2: .* not a valid gitignore"):
        snapshot.snapshot(tmp_path, tmp_path.parent / "out")


def test_an_undecodable_ignore_file_is_named(tmp_path: Path) -> None:
    (tmp_path / ".hpcdetignore").write_bytes(b"*.pyc\n\xff\xfe\n")
    with pytest.raises(ContextError, match=r"cannot read the ignore file .*\.hpcdetignore"):
        snapshot.snapshot(tmp_path, tmp_path.parent / "out")



def test_what_the_ignore_rules_leave_out_is_not_warned_about(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x")
    (tmp_path / "old_link").symlink_to(tmp_path / "nowhere")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / ".detignore").write_text("old_link\npipe\n")
    warnings: list[str] = []
    copied = snapshot.snapshot(tmp_path / ".", tmp_path.parent / "out", warn=warnings.append)
    assert copied == (1, 1)
    assert warnings == []


def test_the_default_ignores_match_as_pathspec_reads_them() -> None:
    """A context without an ignore file is matched without pathspec (its import costs every
    create ~35 ms): the same answers, also for what lies in an ignored directory."""
    import itertools

    import pathspec

    spec = pathspec.GitIgnoreSpec.from_lines(snapshot.DEFAULT_IGNORES)
    names = ["a", "a.py", "__pycache__", ".git", ".vscode", ".idea", ".mypy_cache", "x.pyc",
             "x.pyo", ".pyc", "pyc", "x.pyd", "A$py.class", "terraform", "terraform.tfstate",
             "myterraform", "shared_fs", "shared_fs2", ".gitignore"]
    defaults = snapshot._Defaults()
    for depth in (1, 2, 3):
        for parts in itertools.product(names, repeat=depth):
            for path in ("/".join(parts), "/".join(parts) + "/"):
                assert defaults.match_file(path) == spec.match_file(path), path


def test_a_context_without_ignore_files_does_not_import_pathspec(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("m")
    (tmp_path / "pkg" / "m.pyc").write_text("m")
    code = ("import sys; from pathlib import Path; from hpcdet import snapshot; "
            f"print(snapshot.select_files(Path({str(tmp_path)!r}))); "
            "print('pathspec' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.split("\n")[:2] == ["[PosixPath('pkg/m.py')]", "False"]
