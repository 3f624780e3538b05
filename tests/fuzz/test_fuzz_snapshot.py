"""Property: a context directory of any shape snapshots or fails with hpcdet's ContextError,
never another exception. Trees hold files, nested directories, symlinks to files, to
directories, to nothing and in loops, FIFOs, unreadable files, ignore files with arbitrary
lines, names with spaces, unicode and newlines, symlinks to the kernel's files (/proc, /sys,
/dev) and files around the size limit (lowered to LIMIT), with --include files beside it.
A snapshot that succeeds holds at most LIMIT bytes; one that fails leaves nothing behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcdet import snapshot
from hpcdet.errors import ContextError

LIMIT = 64
# Small ones too, which fit under LIMIT: the size is no defence against them.
KERNEL = ["/proc/self/pagemap", "/proc/self/oom_score_adj", "/proc/self/loginuid",
          "/proc/sys/kernel/ostype", "/dev/zero", "/dev/null", "/sys/kernel", "/proc/self",
          "/dev/stdin"]
NAMES = ["a", "b", "pkg", "b c", "ünï", "new\nline", "-x", ".hidden", "*", "tab\tx", "..."]

entry = st.one_of(
    st.tuples(st.just("dir"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3)),
    st.tuples(st.just("file"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),
              st.binary(max_size=20)),
    st.tuples(st.just("link"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),
              st.sampled_from([".", "..", "../..", "a", "pkg", "nowhere", "/", "b c/a",
                               "loop", "/nonexistent/x"])),
    st.tuples(st.just("fifo"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=2)),
    st.tuples(st.just("link"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=2),
              st.sampled_from(KERNEL)),
    st.tuples(st.just("sized"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=2),
              st.integers(LIMIT - 3, LIMIT + 3)),
    st.tuples(st.just("unreadable"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=2)),
    st.tuples(st.just("ignore"), st.sampled_from(snapshot.IGNORE_FILES),
              st.lists(st.one_of(st.text(max_size=12),
                                 st.text(alphabet="!\\[]-*/?#az \n", max_size=6)),
                       max_size=4),
              st.booleans()),
)


def _build(root: Path, entries: list[tuple[object, ...]]) -> None:
    for kind, *spec in entries:
        try:
            if kind == "ignore":
                name, lines, undecodable = spec
                text = "\n".join(str(x) for x in lines).encode("utf-8", "surrogatepass")
                if os.path.lexists(root / str(name)):
                    continue
                (root / str(name)).write_bytes(text + (b"\xff\xfe" if undecodable else b""))
                continue
            path = root.joinpath(*spec[0])  # type: ignore[misc]
            if os.path.lexists(path):
                continue  # writing to a FIFO made earlier would block
            if kind == "dir":
                path.mkdir(parents=True)
            elif kind == "file":
                path.write_bytes(spec[1])  # type: ignore[arg-type]
            elif kind == "link":
                path.symlink_to(str(spec[1]))
            elif kind == "sized":
                path.write_bytes(b"s" * int(str(spec[1])))
            elif kind == "fifo":
                os.mkfifo(path)
            elif kind == "unreadable":
                path.write_text("secret")
                path.chmod(0)
        except OSError:
            pass  # the parent is missing or not a directory, or the name is taken


def _snapshot_or_context_error(
    entries: list[tuple[object, ...]], includes: Sequence[tuple[object, ...]] = ()
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, dest, beside = Path(tmp) / "ctx", Path(tmp) / "dest", Path(tmp) / "beside"
        root.mkdir()
        beside.mkdir()
        _build(root, entries)
        _build(beside, list(includes))
        warnings: list[str] = []
        taken = snapshot.Snapshot(dest, warn=warnings.append, limit=LIMIT)
        try:
            taken.context(root)
        except ContextError as e:
            assert str(e)
            assert not os.path.lexists(dest)
            return
        try:
            for extra in sorted(beside.iterdir()):
                before = sorted(dest.rglob("*"))
                try:
                    taken.include(extra)
                except ContextError as e:
                    assert str(e)
                    assert sorted(dest.rglob("*")) == before  # only the include taken back
        finally:
            for p in [*root.rglob("*"), *beside.rglob("*")]:  # so the directory can be removed
                if not p.is_symlink():
                    p.chmod(0o700)
        copied = [p for p in dest.rglob("*") if not p.is_dir()]
        assert all(p.is_file() and not p.is_symlink() for p in copied)
        assert (len(copied), sum(p.stat().st_size for p in copied)) == (taken.files, taken.bytes)
        assert taken.bytes <= LIMIT
        for p in copied:  # nothing the kernel makes up, read through a symlink
            rel = p.relative_to(dest)
            source = root / rel if (root / rel).exists() else beside / rel
            assert not os.path.realpath(source).startswith(("/proc/", "/sys/", "/dev/")), rel
        shutil.rmtree(dest)


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entry, max_size=12), st.lists(entry, max_size=3))
def test_any_context_snapshots_or_fails_with_a_context_error(
    entries: list[tuple[object, ...]], includes: list[tuple[object, ...]]
) -> None:
    _snapshot_or_context_error(entries, includes)


# Examples the fuzz reduced (on the code before issue 9 or on a first fix), kept as found.
@pytest.mark.parametrize("entries", [
    [("link", ["a"], "pkg")],  # dangling: FileNotFoundError from stat
    [("link", ["a"], "a")],  # a link to itself: OSError (too many levels of symbolic links)
    [("fifo", ["a"])],  # a FIFO: copying it blocked or failed
    [("link", ["a"], "/")],  # a link to a directory holding the context: walked for ever
    [("link", ["a"], "..")],
    [("ignore", ".detignore", ["!"], False)],  # GitIgnorePatternError
    [("ignore", ".detignore", ["[z-a]"], False)],  # re.error
    [("ignore", ".hpcdetignore", [], True)],  # UnicodeDecodeError
])
def test_reduced_fuzz_examples(entries: list[tuple[object, ...]]) -> None:
    _snapshot_or_context_error(entries)


# Issue 37: found with the check of where a symlink leads taken out, as the sizes alone let
# them through.
@pytest.mark.parametrize(("entries", "includes"), [
    ([], [("link", ["a"], "/proc/self/oom_score_adj")]),  # 2 bytes, copied from the kernel
    ([("link", ["a"], "/proc/self/oom_score_adj")], []),
    ([("link", ["a"], "/proc/self/pagemap")], []),  # says 0 bytes, gives terabytes
    ([("sized", ["a"], LIMIT)], [("sized", ["b"], 1)]),  # the limit over context and includes
])
def test_reduced_fuzz_examples_of_special_files(
    entries: list[tuple[object, ...]], includes: list[tuple[object, ...]]
) -> None:
    _snapshot_or_context_error(entries, includes)
