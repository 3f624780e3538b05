"""A search of many short trials on Slurm, packed into pilot allocations
(``resources.packing``) against one job per trial (the search's job array), in one run.

Usage: ``python -m bench.packing [TRIALS [SECONDS [SLOTS]]]`` (default 200 30 8), or
``python -m bench.packing asha [TRIALS [SECONDS]]`` (default 60 20: issue 45's acceptance
search, adaptive ASHA over the Core API tutorial's stage 3, a full-length trial SECONDS long,
packed in 4 allocations of 2 slots against its job array 8 at once), on a host
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
from bench.sandbox import REPO, Sandbox

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


ASHA = """\
name: bench-packing-asha
entrypoint: python3 3_hpsearch_v038.py
hyperparameters:
  increment_by: {{type: int, minval: 1, maxval: 8}}
searcher: {{name: adaptive_asha, metric: x, smaller_is_better: false, max_trials: {trials},
           time_metric: batches, max_time: 100, max_concurrent_trials: 8}}
reproducibility: {{experiment_seed: 11}}
max_restarts: 0
resources:
  slots_per_trial: 1
{packing}"""


def _one(root: Path, config: str, ctx: Path, timeout: float
         ) -> tuple[float, int, int, int, int]:
    """(makespan in s, sbatch calls, scheduler commands, allocations, trials) of one search."""
    box = Sandbox(root, "slurm", count_calls=True)
    with box.daemon():
        start = time.perf_counter()
        exp_id = box.create(config, ctx)
        box.wait(exp_id, timeout=timeout)
        makespan = time.perf_counter() - start
    calls = box.calls()
    allocations = len(list(box.state.glob(f"runs/exp-{exp_id}/array/pilot-*")))
    trials = len(box.store().trials(exp_id))
    return makespan, calls["sbatch"], sum(calls.values()), allocations, trials


def _packing(slots: int, allocations: int, minutes: int) -> str:
    return f"  packing: {{slots: {slots}, walltime: '{minutes}', allocations: {allocations}}}\n"


def measure(trials: int = 200, seconds: float = 30, slots: int = 8) -> list[Figure]:
    ideal = trials * seconds / slots
    minutes = int(trials * seconds / slots * 2 + 600) // 60
    timeout = trials * seconds * 4 + 600
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp:
        ctx = Path(tmp) / "ctx"
        ctx.mkdir()
        (ctx / "trial.py").write_text(TRIAL.format(seconds=seconds))
        runs = {}
        for name, packing in (("packed", _packing(max(1, slots // 2), 2, minutes)),
                              ("plain", "")):
            config = CONFIG.format(trials=trials, slots=slots, packing=packing)
            runs[name] = _one(Path(tmp) / name, config, ctx, timeout)
        packed, plain = runs["packed"], runs["plain"]
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


def measure_asha(trials: int = 60, seconds: float = 20) -> list[Figure]:
    """Issue 45's acceptance search: 8 slots as 4 allocations of 2, against the array."""
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp:
        ctx = Path(tmp) / "ctx"
        ctx.mkdir()
        script = (REPO / "examples" / "core_api" / "3_hpsearch_v038.py").read_text()
        (ctx / "3_hpsearch_v038.py").write_text(
            script.replace("time.sleep(0.1)", f"time.sleep({seconds / 100:g})"))
        runs = {name: _one(Path(tmp) / name, ASHA.format(trials=trials, packing=packing), ctx,
                           trials * seconds * 2 + 600)
                for name, packing in (("packed", _packing(2, 4, 60)), ("plain", ""))}
    packed, plain = runs["packed"], runs["plain"]
    what = f"adaptive ASHA, {trials} trials of up to {seconds:g} s, 8 slots"
    return [
        Figure("packing", f"allocations, {what}, packed (4 of 2 slots)", packed[3],
               "allocations", "one job per trial: its array's tasks", plain[4], "≤ 4",
               packed[3] <= 4),
        Figure("packing", f"trials run, {what}, packed", packed[4], "trials",
               "one job per trial", plain[4], f"= {trials}", packed[4] == trials),
        Figure("packing", f"scheduler commands, {what}, packed", packed[2], "commands",
               "one job per trial", plain[2]),
        Figure("packing", f"makespan, {what}, packed", packed[0], "s", "one job per trial",
               plain[0]),
    ]


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["asha"]:
        print(table(measure_asha(int(args[1]) if len(args) > 1 else 60,
                                 float(args[2]) if len(args) > 2 else 20)))
        sys.exit(0)
    print(table(measure(int(args[0]) if args else 200, float(args[1]) if len(args) > 1 else 30,
                        int(args[2]) if len(args) > 2 else 8)))
