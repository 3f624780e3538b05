"""resources.max_slots over an experiment's live jobs (pure)."""

from __future__ import annotations

from hpcdet.daemon.arrays import slot_room


def test_no_cap_limits_nothing() -> None:
    assert slot_room(None, 5, 5) == (None, True)


def test_an_array_leaves_room_for_live_singles_and_singles_wait_for_arrays() -> None:
    assert slot_room(3, 0, 0) == (3, True)
    assert slot_room(3, 0, 2) == (1, True)
    assert slot_room(3, 0, 3) == (0, False)  # full: a new array waits too
    assert slot_room(3, 1, 0) == (3, False)  # a live array task: singles wait for it
    assert slot_room(1, 0, 0) == (1, True)
