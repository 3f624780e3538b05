"""A corrupt line in one run's event log is skipped and reported once; the other runs' events
and the ones after it are ingested (the daemon reading a real run tree and database)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcdet.paths import StatePaths
from hpcdet.rundir.layout import EVENTS_FILE
from tests.unit.daemon.two_runs import two_running_runs


def _metrics(seq: int, step: int) -> str:
    return json.dumps({"seq": seq, "type": "metrics", "time": 1.0, "group": "training",
                       "steps_completed": step, "metrics": {"loss": 1.0 / step}}) + "\n"


def test_a_corrupt_line_in_one_log_stops_neither_that_run_nor_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    paths = StatePaths(tmp_path)
    daemon = two_running_runs(paths)
    torn = paths.run(1, 1, 1) / EVENTS_FILE
    torn.parent.mkdir(parents=True, exist_ok=True)
    glued = _metrics(2, 2)[:40] + _metrics(3, 3)  # killed mid-write, resumed without a cut
    torn.write_text(_metrics(1, 1) + glued + _metrics(4, 4))
    good = paths.run(2, 2, 1) / EVENTS_FILE
    good.parent.mkdir(parents=True, exist_ok=True)
    good.write_text(_metrics(1, 1) + _metrics(2, 2))

    daemon.reconcile()
    for _ in range(3):
        daemon.tick()

    assert [m.steps_completed for m in daemon.store.metrics(1)] == [1, 4]
    assert [m.steps_completed for m in daemon.store.metrics(2)] == [1, 2]
    warning = f"skipped a corrupt line in {torn} at byte offset {len(_metrics(1, 1))}"
    assert caplog.text.count(warning) == 1
    with open(torn, "a") as f:
        f.write(_metrics(5, 5) + "\x00garbage\n")
    daemon.tick()
    assert [m.steps_completed for m in daemon.store.metrics(1)] == [1, 4, 5]
    assert caplog.text.count(warning) == 1
    # The offset goes past a corrupt last line too: it is not read again on every tick.
    [run] = daemon.store.runs([1])
    assert (run.event_offset, run.event_seq) == (torn.stat().st_size, 5)
