"""The harness's log thread on a full disk (issue 9, item 10): it keeps draining the
entrypoint's output, so the trial never blocks on a full pipe, and says what it dropped."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hpcdet.launch.harness import OutputSink, _pump
from tests.full_disk import fill, mount_small_fs

LINES = 5000  # about 550 KB: far more than a pipe holds
CHILD = f"""
import os, sys, time
LINES = {LINES}
for i in range(LINES):
    print(f"line {{i}} " + "x" * 100)
sys.stdout.flush()
open(sys.argv[1], "w").close()
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)
print("after the disk was freed")
"""


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    yield from mount_small_fs(tmp_path / "fs", size="1m")


def _wait_for(done: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.05)
    return False


def test_output_is_drained_while_the_log_disk_is_full_and_the_gap_is_marked(
    tmp_path: Path, small_fs: Path
) -> None:
    printed, go = tmp_path / "printed", tmp_path / "go"
    log_path = small_fs / "logs" / "node-0.log"
    filler = fill(small_fs)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(printed), str(go)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # /dev/full stands for the harness's stdout on the same full disk.
    sinks = [OutputSink.file(log_path), OutputSink.file(Path("/dev/full"))]
    pump = threading.Thread(target=_pump, args=(child.stdout, sinks), daemon=True)
    pump.start()
    dropped = sum(len(f"line {i} " + "x" * 100) + 1 for i in range(LINES))
    try:
        assert _wait_for(printed.exists, 20), "the entrypoint blocked on its output pipe"
        assert _wait_for(lambda: sinks[0].dropped == dropped, 10), sinks[0].dropped
        filler.unlink()
        go.touch()
        assert child.wait(timeout=10) == 0
        pump.join(timeout=10)
        assert not pump.is_alive()
    finally:
        go.touch()
        child.kill()
        child.wait()
    lines = log_path.read_text().splitlines()
    assert lines[0].endswith(
        f" [hpcdet: {dropped} bytes of output dropped: no space left on device]")
    assert lines[1].endswith(" after the disk was freed")
    assert len(lines) == 2
