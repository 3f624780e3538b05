from __future__ import annotations

import contextlib
import os
import re
import signal
import tempfile
from collections.abc import Iterator
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


# Issue 37 item 5: the size limit counts the bytes copied, and what the kernel makes up is
# never read.


def _refused(src: Path, dest: Path, match: str) -> ContextError:
    with pytest.raises(ContextError, match=match) as info:
        snapshot.snapshot(src, dest)
    assert not dest.exists(), "a failed snapshot leaves nothing behind"
    return info.value


@pytest.mark.parametrize(("target", "real"), [
    ("/proc/self/pagemap", r"/proc/\d+/pagemap"),  # says 0 bytes, gives terabytes
    ("/dev/zero", "/dev/zero"),
    ("/sys/kernel", "/sys/kernel"),  # a directory of the kernel's files
    ("/dev/stdin", r"/(proc|dev)/"),  # wherever stdin is: a pipe, a tty, /dev/null
])
def test_a_symlink_to_a_kernel_file_is_refused_by_name(
    tmp_path: Path, target: str, real: str
) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "m.py").write_text("m")
    (src / "pkg" / "data").symlink_to(target)
    message = str(_refused(src, tmp_path / "dest", "'pkg/data' in the context directory"))
    assert re.search(f"leads to {real}", message), message
    assert ".detignore" in message


def test_a_kernel_file_the_ignore_rules_leave_out_is_no_error(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("m")
    (tmp_path / "pagemap").symlink_to("/proc/self/pagemap")
    (tmp_path / "kernel").symlink_to("/sys/kernel")
    (tmp_path / ".detignore").write_text("pagemap\nkernel/\n")
    assert snapshot.snapshot(tmp_path, tmp_path.parent / "out") == (1, 1)


def test_a_context_under_proc_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ContextError, match="context directory /proc/self/fdinfo leads to /proc/"):
        snapshot.snapshot(Path("/proc/self/fdinfo"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_fifo_is_skipped_without_blocking_also_through_a_symlink(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    os.mkfifo(tmp_path / "pipe")
    (src / "pipe").symlink_to(tmp_path / "pipe")
    (src / "m.py").write_text("m")
    warnings: list[str] = []
    with _deadline(5):
        assert snapshot.snapshot(src, tmp_path / "dest", warn=warnings.append) == (1, 1)
    assert warnings == ["skipped 'pipe' in the context: a FIFO, not a file"]


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Fail, rather than hang, when a FIFO is opened for reading."""
    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_file_that_grows_after_the_walk_is_cut_off_at_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("a" * 10)
    (src / "log.txt").write_text("x" * 10)
    walk = snapshot._walk

    def walk_then_grow(root: Path, warn: snapshot.Warn) -> object:
        found = walk(root, warn)  # sizes 10 + 10: under the limit
        with (src / "log.txt").open("a") as f:
            f.write("x" * 5000)
        return found

    monkeypatch.setattr(snapshot, "_walk", walk_then_grow)
    monkeypatch.setattr(snapshot, "MAX_CONTEXT_BYTES", 100)
    message = str(_refused(src, tmp_path / "dest", r"(?s)95 MB limit.*'log\.txt' passed the limit"
                                                   r" while it was copied.*log\.txt"))
    assert "a.py" in message


def test_the_limit_counts_bytes_copied_not_the_sizes_claimed(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"0" * 60)
    (tmp_path / "b.bin").write_bytes(b"0" * 40)
    taken = snapshot.Snapshot(tmp_path.parent / "out", limit=100)
    taken.context(tmp_path)
    assert (taken.files, taken.bytes) == (2, 100)  # exactly the limit is allowed
    (tmp_path / "c.bin").write_bytes(b"0")
    with pytest.raises(ContextError, match=r"(?s)at least 0\.0 MB.*a\.bin"):
        snapshot.Snapshot(tmp_path.parent / "again", limit=100).context(tmp_path)


def test_an_include_over_the_limit_is_refused_and_only_it_is_taken_back(tmp_path: Path) -> None:
    ctx, dest = tmp_path / "ctx", tmp_path / "dest"
    ctx.mkdir()
    (ctx / "train.py").write_text("t" * 60)
    (tmp_path / "big.bin").write_bytes(b"0" * 120)
    (tmp_path / "half.bin").write_bytes(b"0" * 50)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "part.bin").write_bytes(b"0" * 50)
    taken = snapshot.Snapshot(dest, limit=100)
    taken.context(ctx)
    for extra, biggest in [("big.bin", "big.bin"), ("half.bin", "train.py"),
                           ("data", "train.py")]:
        with pytest.raises(ContextError, match=rf"(?s)context directory {ctx} with its --include "
                                               rf"files holds more than the 95 MB limit.*"
                                               rf"\n +0\.0 MB  {biggest}\n"):
            taken.include(tmp_path / extra)
        assert sorted(p.name for p in dest.iterdir()) == ["train.py"]
    assert (dest / "train.py").read_text() == "t" * 60
    (tmp_path / "small.bin").write_bytes(b"0" * 40)
    taken.include(tmp_path / "small.bin")
    assert (taken.files, taken.bytes) == (2, 100)


@pytest.mark.parametrize(("name", "match"), [
    ("pagemap", r"--include .*/pagemap leads to /proc/\d+/pagemap"),
    ("zero", "--include .*/zero leads to /dev/zero"),
    ("pipe", "--include .*/pipe: a FIFO, not a file or a directory"),
    ("nothing", "--include .*/nothing: No such file or directory"),
])
def test_an_include_of_a_special_file_is_refused(tmp_path: Path, name: str, match: str) -> None:
    (tmp_path / "pagemap").symlink_to("/proc/self/pagemap")
    (tmp_path / "zero").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "pipe")
    dest = tmp_path / "dest"
    dest.mkdir()
    with _deadline(5), pytest.raises(ContextError, match=match):
        snapshot.Snapshot(dest).include(tmp_path / name)
    assert list(dest.iterdir()) == []


def test_a_copy_keeps_the_mode_less_the_umask_and_the_times(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "run.sh").write_text("echo")
    (src / "run.sh").chmod(0o777)
    os.utime(src / "run.sh", (1_000_000, 2_000_000))
    old = os.umask(0o027)
    try:
        snapshot.snapshot(src, tmp_path / "dest")
    finally:
        os.umask(old)
    st = (tmp_path / "dest" / "run.sh").stat()
    assert (st.st_mode & 0o777, st.st_mtime) == (0o750, 2_000_000)


def test_a_symlink_into_dev_shm_is_a_plain_file(tmp_path: Path) -> None:
    """/dev/shm is a tmpfs of ordinary files, not the kernel's."""
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm on this machine")  # not a component hpcdet needs
    (tmp_path / "src").mkdir()
    with tempfile.NamedTemporaryFile(dir="/dev/shm") as shared:
        shared.write(b"data")
        shared.flush()
        (tmp_path / "src" / "data").symlink_to(shared.name)
        assert snapshot.snapshot(tmp_path / "src", tmp_path / "dest") == (1, 4)
    assert (tmp_path / "dest" / "data").read_bytes() == b"data"
