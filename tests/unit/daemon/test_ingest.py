"""A corrupt line in one run's event log is skipped and reported once; the other runs' events
and the ones after it are ingested (the daemon reading a real run tree and database)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.loop import Daemon
from hpcdet.paths import StatePaths
from hpcdet.rundir.layout import EVENTS_FILE
from hpcdet.schedulers.runner import CommandRunner, Result


class QuietSlurm(CommandRunner):
    """Slurm with both jobs running."""

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None) -> Result:
        if cmd[0] == "squeue":
            return Result("".join(f"10{e}|RUNNING|None|n1|1000|0|debug|N/A|/tmp|"
                                  f"hpcdet-e{e}-t{e}-r1\n" for e in (1, 2)), "", 0)
        return Result("", "", 0)


def _metrics(seq: int, step: int) -> str:
    return json.dumps({"seq": seq, "type": "metrics", "time": 1.0, "group": "training",
                       "steps_completed": step, "metrics": {"loss": 1.0 / step}}) + "\n"


def test_a_corrupt_line_in_one_log_stops_neither_that_run_nor_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    paths = StatePaths(tmp_path)
    daemon = Daemon(paths, ClusterConfig(backend="slurm"), QuietSlurm())
    config = {"name": "x", "entrypoint": "true",
              "searcher": {"name": "single", "metric": "loss", "max_length": 1}}
    for e in (1, 2):
        daemon.journal.record(e, "experiment_created", name=f"e{e}", config=config,
                              backend="slurm", searcher="single")
        daemon.journal.record(e, "trial_created", trial_id=e, hparams={}, trial_seed=0)
        daemon.journal.record(e, "run_submitting", trial_id=e, run_id=1)
        daemon.journal.record(e, "run_submitted", trial_id=e, run_id=1, job_id=f"10{e}")
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
