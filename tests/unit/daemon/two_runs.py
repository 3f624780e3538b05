"""A daemon on Slurm with two experiments of one running run each (trial e of experiment e,
job 10e), journaled as the daemon journals them; nothing read yet."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.loop import Daemon
from hpcdet.paths import StatePaths
from hpcdet.schedulers.runner import CommandRunner, Result
from hpcdet.store.entries import ExperimentCreated, RunSubmitted, RunSubmitting, TrialCreated


class QuietSlurm(CommandRunner):
    """Slurm with both jobs running."""

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        if cmd[0] == "squeue":
            return Result("".join(f"10{e}|RUNNING|None|n1|1000|0|debug|N/A|/tmp|"
                                  f"hpcdet-e{e}-t{e}-r1\n" for e in (1, 2)), "", 0)
        return Result("", "", 0)


def two_running_runs(paths: StatePaths) -> Daemon:
    daemon = Daemon(paths, ClusterConfig(backend="slurm"), QuietSlurm())
    config = {"name": "x", "entrypoint": "true",
              "searcher": {"name": "single", "metric": "loss", "max_length": 1}}
    for e in (1, 2):
        daemon.journal.record(e, ExperimentCreated(name=f"e{e}", config=config,
                              backend="slurm", searcher="single"))
        daemon.journal.record(e, TrialCreated(trial_id=e, hparams={}, trial_seed=0))
        daemon.journal.record(e, RunSubmitting(trial_id=e, run_id=1))
        daemon.journal.record(e, RunSubmitted(trial_id=e, run_id=1, job_id=f"10{e}"))
        paths.run(e, e, 1).mkdir(parents=True, exist_ok=True)
    return daemon
