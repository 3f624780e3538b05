"""A trial that exits 0 without reporting anything completes, as in Determined, and says so in
its end reason (shown by `experiment describe`), where one that reported has none."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.loop import Daemon
from hpcdet.paths import StatePaths
from hpcdet.rundir.atomic import write_atomic
from hpcdet.rundir.layout import EVENTS_FILE, EXIT_FILE
from hpcdet.schedulers.runner import CommandRunner, Result
from hpcdet.search.base import Initialize
from hpcdet.states import SILENT_EXIT
from hpcdet.store.entries import ExperimentCreated, RunSubmitted, RunSubmitting


class FinishedSlurm(CommandRunner):
    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        return Result("", "", 0)


def test_a_silent_exit_zero_completes_with_a_reason(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    daemon = Daemon(paths, ClusterConfig(backend="slurm"), FinishedSlurm())
    config = {"name": "x", "entrypoint": "true",
              "searcher": {"name": "single", "metric": "loss", "max_length": 1}}
    for e in (1, 2):
        daemon.journal.record(e, ExperimentCreated(name=f"e{e}", config=config,
                              backend="slurm", searcher="single"))
        exp = daemon.store.experiment(e)
        daemon.search.feed(exp, daemon.configs.get(exp), Initialize(), None)  # creates trial e
        daemon.journal.record(e, RunSubmitting(trial_id=e, run_id=1))
        daemon.journal.record(e, RunSubmitted(trial_id=e, run_id=1, job_id=f"10{e}"))
        write_atomic(paths.run(e, e, 1) / EXIT_FILE, {"exit_code": 0})
    (paths.run(2, 2, 1) / EVENTS_FILE).write_text(
        '{"seq": 1, "type": "progress", "time": 1.0, "progress": 1.0}\n')
    daemon.reconcile()
    daemon.tick()
    silent, reported = daemon.store.trial(1), daemon.store.trial(2)
    assert (silent.state, silent.end_reason) == ("COMPLETED", SILENT_EXIT)
    assert (reported.state, reported.end_reason) == ("COMPLETED", "")
    assert [e.state for e in daemon.store.experiments()] == ["COMPLETED", "COMPLETED"]
