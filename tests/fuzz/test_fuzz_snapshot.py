"""Property: a context directory of any shape snapshots or fails with hpcdet's ContextError,
never another exception. Trees hold files, nested directories, symlinks to files, to
directories, to nothing and in loops, FIFOs, unreadable files, ignore files with arbitrary
lines, and names with spaces, unicode and newlines."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcdet import snapshot
from hpcdet.errors import ContextError

NAMES = ["a", "b", "pkg", "b c", "ünï", "new\nline", "-x", ".hidden", "*", "tab\tx", "..."]

entry = st.one_of(
    st.tuples(st.just("dir"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3)),
    st.tuples(st.just("file"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),
              st.binary(max_size=20)),
    st.tuples(st.just("link"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),
              st.sampled_from([".", "..", "../..", "a", "pkg", "nowhere", "/", "b c/a",
                               "loop", "/nonexistent/x"])),
    st.tuples(st.just("fifo"), st.lists(st.sampled_from(NAMES), min_size=1, max_size=2)),
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
            elif kind == "fifo":
                os.mkfifo(path)
            elif kind == "unreadable":
                path.write_text("secret")
                path.chmod(0)
        except OSError:
            pass  # the parent is missing or not a directory, or the name is taken


def _snapshot_or_context_error(entries: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, dest = Path(tmp) / "ctx", Path(tmp) / "dest"
        root.mkdir()
        _build(root, entries)
        warnings: list[str] = []
        try:
            files, size = snapshot.snapshot(root, dest, warn=warnings.append)
        except ContextError as e:
            assert str(e)
            return
        finally:
            for p in root.rglob("*"):  # so the temporary directory can be removed
                if not p.is_symlink():
                    p.chmod(0o700)
        copied = [p for p in dest.rglob("*") if not p.is_dir()]
        assert all(p.is_file() and not p.is_symlink() for p in copied)
        assert (len(copied), sum(p.stat().st_size for p in copied)) == (files, size)
        shutil.rmtree(dest)


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entry, max_size=12))
def test_any_context_snapshots_or_fails_with_a_context_error(
    entries: list[tuple[object, ...]]
) -> None:
    _snapshot_or_context_error(entries)


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
