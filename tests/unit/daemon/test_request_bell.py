"""The doorbell: a CLI on the daemon's host ends the loop's wait for requests at once; a
daemon that does not listen, or anything but its FIFO at that path, is left alone."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from hpcdet.daemon.request_bell import RequestBell
from hpcdet.paths import StatePaths
from hpcdet.protocol.filedrop import ring, wake_path


def _paths(tmp_path: Path) -> StatePaths:
    paths = StatePaths(tmp_path / "state")
    paths.local_dir().mkdir(parents=True)
    return paths


def test_a_ring_ends_the_wait_at_once_and_is_taken(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    doorbell = RequestBell(paths)
    try:
        threading.Timer(0.05, ring, (paths,)).start()
        start = time.monotonic()
        doorbell.wait(10)
        assert time.monotonic() - start < 5
        ring(paths)
        ring(paths)
        doorbell.wait(10)  # both rings at once
        start = time.monotonic()
        doorbell.wait(0.1)  # none left
        assert time.monotonic() - start >= 0.09
    finally:
        doorbell.close()


def test_a_daemon_killed_leaves_a_fifo_the_next_one_makes_again(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    RequestBell(paths)  # never closed: a killed daemon's
    doorbell = RequestBell(paths)
    try:
        ring(paths)
        start = time.monotonic()
        doorbell.wait(10)
        assert time.monotonic() - start < 5
    finally:
        doorbell.close()


def test_ringing_with_no_daemon_listening_does_nothing(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    ring(paths)  # none made it
    assert not wake_path(paths).exists()
    RequestBell(paths).close()  # made, and nobody reads it now
    ring(paths)
    wake_path(paths).unlink()
    wake_path(paths).write_text("")  # not a FIFO: no byte goes into it
    ring(paths)
    assert wake_path(paths).read_text() == ""
    wake_path(paths).unlink()
    wake_path(paths).symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_text("")
    ring(paths)
    assert (tmp_path / "elsewhere").read_text() == ""


def test_without_fifos_the_loop_waits_its_time(tmp_path: Path) -> None:
    doorbell = RequestBell(StatePaths(tmp_path / "missing"))  # no directory to make it in
    assert doorbell.fd is None
    start = time.monotonic()
    doorbell.wait(0.05)
    assert time.monotonic() - start >= 0.045
