"""Atomic replaces and whole-line appends (hpcdet.rundir.atomic)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcdet.rundir.atomic import (
    append_line,
    read_lines,
    whole_lines,
    write_atomic,
    write_text_atomic,
)


def test_a_journal_line_torn_by_a_kill_is_cut_off_before_the_next(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    append_line(path, {"kind": "a"})
    with open(path, "a") as f:
        f.write('{"kind": "b", "bo')  # the daemon died here
    assert [e["kind"] for e in read_lines(path)] == ["a"]
    append_line(path, {"kind": "c"})
    assert [e["kind"] for e in read_lines(path)] == ["a", "c"]


def test_an_append_says_where_its_line_starts_after_the_torn_tail_was_cut(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    assert append_line(path, {"kind": "a"}) == 0
    size = path.stat().st_size
    with open(path, "a") as f:
        f.write('{"kind": "b", "bo')
    assert append_line(path, {"kind": "c"}) == size


def test_whole_lines_read_in_chunks_give_each_line_with_its_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hpcdet.rundir.atomic._READ_CHUNK", 5)
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"kind": "a"}\n\n{"kind": "bb"}\n{"kind": "c')
    assert list(whole_lines(path)) == [(0, 14, {"kind": "a"}), (15, 30, {"kind": "bb"})]
    assert list(whole_lines(path, 15)) == [(15, 30, {"kind": "bb"})]


def test_a_corrupt_journal_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text('{"kind": "a"}\n{"kind": "b", "x{"kind": "c"}\n{"kind": "d"}\n')
    assert [e["kind"] for e in read_lines(path)] == ["a", "d"]


def test_atomic_writes_follow_the_umask(tmp_path: Path) -> None:
    """0600 by default, and readable by the group when the cluster config shares with one
    (the shared umask 027), like every other file hpcdet writes."""
    before = os.umask(0o027)
    try:
        write_atomic(tmp_path / "shared.json", {"a": 1})
        os.umask(0o077)
        write_atomic(tmp_path / "private.json", {"a": 1})
    finally:
        os.umask(before)
    assert (tmp_path / "shared.json").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "private.json").stat().st_mode & 0o777 == 0o600


def test_write_text_atomic_replaces_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "hostfile-7.1.txt"
    write_text_atomic(path, "old\n")
    write_text_atomic(path, "localhost slots=2\n")
    assert path.read_text() == "localhost slots=2\n"
    assert os.listdir(path.parent) == [path.name]
