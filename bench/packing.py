"""A search of many short trials on Slurm, packed into pilot allocations
(``resources.packing``) against one job per trial (the search's job array), in one run.

Usage: ``python -m bench.packing [TRIALS [SECONDS [SLOTS]]]`` (default 200 30 8), on a host
whose ``sbatch`` reaches a Slurm cluster (``scripts/slurm-test-cluster.sh start`` makes one
of 2 nodes x 4 CPUs). Each trial sleeps SECONDS and reports one validation. Packed: allocations
of one node's slots (SLOTS / 2 each), 2 of them; one job per trial: the same search, SLOTS at
once. Both through the real CLI and daemon, with every scheduler command counted by a shim on
its way to the real one. The makespan is create to the experiment's end; the ideal is
TRIALS x SECONDS / SLOTS.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from bench.figures import Figure, table
from bench.sandbox import Sandbox

TRIAL = """\
import time
import determined as det

with det.core.init() as core:
    time.sleep({seconds})
    core.train.report_validation_metrics(steps_completed=1, metrics={{"loss": 1.0}})
"""
CONFIG = """\
name: bench-packing
entrypoint: python3 trial.py
hyperparameters:
  lr: {{type: log, base: 10, minval: -4, maxval: -1}}
searcher: {{name: random, metric: loss, max_trials: {trials}, max_concurrent_trials: {slots},
           max_length: 1}}
max_restarts: 0
resources:
  slots_per_trial: 1
{packing}"""


def _one(root: Path, trials: int, seconds: float, slots: int, packed: bool
         ) -> tuple[float, int, int]:
    """(makespan in s, sbatch calls, scheduler commands) of one search."""
    box = Sandbox(root, "slurm", count_calls=True)
    ctx = root / "ctx"
    ctx.mkdir()
    (ctx / "trial.py").write_text(TRIAL.format(seconds=seconds))
    per = max(1, slots // 2)
    walltime = int(trials * seconds / slots * 2 + 600)
    packing = (f"  packing: {{slots: {per}, walltime: '{walltime // 60}', allocations: 2}}\n"
               if packed else "")
    with box.daemon():
        start = time.perf_counter()
        exp_id = box.create(CONFIG.format(trials=trials, slots=slots, packing=packing), ctx)
        box.wait(exp_id, timeout=trials * seconds * 4 + 600)
        makespan = time.perf_counter() - start
    calls = box.calls()
    return makespan, calls["sbatch"], sum(calls.values())


def measure(trials: int = 200, seconds: float = 30, slots: int = 8) -> list[Figure]:
    ideal = trials * seconds / slots
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp:
        packed = _one(Path(tmp) / "packed", trials, seconds, slots, True)
        plain = _one(Path(tmp) / "plain", trials, seconds, slots, False)
    what = f"{trials} trials x {seconds:g} s on {slots} slots"
    baseline = "one job per trial (the search's job array)"
    return [
        Figure("packing", f"jobs submitted, {what}, packed in 2 allocations", packed[1],
               "jobs", "one job per trial: its array's tasks, each a job to Slurm "
               "(MaxJobCount, MaxSubmitJobs)", trials, "≤ 5", packed[1] <= 5),
        Figure("packing", "sbatch calls, packed", packed[1], "calls",
               "one job per trial: sbatch calls for its arrays", plain[1]),
        Figure("packing", f"scheduler commands, {what}, packed", packed[2], "commands",
               baseline, plain[2]),
        Figure("packing", f"makespan, {what}, packed", packed[0], "s",
               f"the ideal: {trials} x {seconds:g} s / {slots} slots", ideal, "≤ 1.2x the ideal",
               packed[0] <= 1.2 * ideal),
        Figure("packing", f"makespan, {what}, one job per trial", plain[0], "s",
               f"the ideal: {trials} x {seconds:g} s / {slots} slots", ideal),
    ]


if __name__ == "__main__":
    args = sys.argv[1:]
    print(table(measure(int(args[0]) if args else 200, float(args[1]) if len(args) > 1 else 30,
                        int(args[2]) if len(args) > 2 else 8)))
