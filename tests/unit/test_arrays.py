from __future__ import annotations

from hpcdet.daemon.arrays import Chunk, next_chunk, owner


def test_one_array_when_the_site_allows() -> None:
    assert next_chunk(200, 0, False, 1001, None) == Chunk(0, 200)
    assert next_chunk(200, 200, False, 1001, None) is None


def test_max_array_size_splits_by_request_range() -> None:
    chunks = []
    covered = 0
    while (c := next_chunk(120, covered, False, 50, None)) is not None:
        chunks.append(c)
        covered += c.count
    assert chunks == [Chunk(0, 50), Chunk(50, 50), Chunk(100, 20)]


def test_next_array_waits_for_the_previous_to_start_everything() -> None:
    assert next_chunk(120, 50, True, 50, None) is None


def test_submit_limit() -> None:
    assert next_chunk(120, 0, False, 1001, 30) == Chunk(0, 30)
    assert next_chunk(120, 0, False, 1001, 0) is None


def test_owner() -> None:
    chunks = [("10", 0, 50), ("11", 50, 50)]
    assert owner(0, chunks) == ("10", 0)
    assert owner(57, chunks) == ("11", 7)
    assert owner(100, chunks) is None
