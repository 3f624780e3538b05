"""What hpcdet adds to each trial of a throttled search on Slurm, against a bare job array.

Usage: ``python bench/trial_turnaround.py [TRIALS] [CONCURRENCY] [REPEATS]`` (default 40 4 2),
on a host where ``sbatch`` reaches a Slurm cluster with room for CONCURRENCY one-CPU jobs
(``scripts/slurm-test-cluster.sh start`` makes one).

Both sides run the same 0.5 s Python task TRIALS times, CONCURRENCY at a time:
- baseline: ``sbatch --array=0-(TRIALS-1)%CONCURRENCY`` of a script that runs the task;
- hpcdet: a ``random`` search with ``max_trials: TRIALS`` and ``max_concurrent_trials:
  CONCURRENCY`` whose trial runs the task and reports one validation metric.

Each side's makespan runs from submission to its last task's end (baseline) or to the
experiment's COMPLETED state (hpcdet). Printed: median makespan per side over REPEATS runs,
seconds per wave of CONCURRENCY trials, and the ratio hpcdet / baseline.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASK = (
    "import os, sys, time\n"
    "start = time.time()\n"
    "time.sleep(0.5)\n"
    "{report}"
    "open(os.path.join(sys.argv[1], sys.argv[2]), 'w').write(f'{{start}} {{time.time()}}')\n"
)
REPORT = (
    "import determined as det\n"
    "with det.core.init() as core:\n"
    "    core.train.report_validation_metrics(steps_completed=1, metrics={'loss': 1.0})\n"
)


def baseline(work: Path, trials: int, concurrency: int) -> float:
    """Makespan of a bare job array of the task."""
    spans = work / "spans"
    spans.mkdir()
    (work / "task.py").write_text(TASK.format(report=""))
    script = work / "array.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"exec {sys.executable} {work / 'task.py'} {spans} $SLURM_ARRAY_TASK_ID\n"
    )
    start = time.time()
    subprocess.run(
        ["sbatch", "--parsable", f"--array=0-{trials - 1}%{concurrency}", "--cpus-per-task=1",
         f"--output={work / 'slurm-%a.out'}", "--no-requeue", str(script)],
        check=True, capture_output=True, text=True,
    )
    while len(list(spans.iterdir())) < trials:
        time.sleep(0.2)
    ends = [float(f.read_text().split()[1]) for f in spans.iterdir()]
    return max(ends) - start


def hpcdet(work: Path, trials: int, concurrency: int) -> float:
    """Makespan of the same tasks as an hpcdet random search."""
    spans = work / "spans"
    spans.mkdir()
    ctx = work / "ctx"
    ctx.mkdir()
    (ctx / "task.py").write_text(TASK.format(report=REPORT))
    (work / "cluster.yaml").write_text("backend: slurm\n")
    (work / "site.yaml").write_text("{}\n")
    config = work / "search.yaml"
    config.write_text(
        f"name: turnaround\nentrypoint: python3 task.py {spans} $DET_TRIAL_ID\n"
        f"searcher: {{name: random, metric: loss, max_trials: {trials}, "
        f"max_concurrent_trials: {concurrency}, max_length: 1}}\n"
        "hyperparameters: {h: {type: int, minval: 1, maxval: 9}}\nmax_restarts: 0\n"
    )
    env = dict(os.environ, HPCDET_HOME=str(work / "state"),
               HPCDET_CLUSTER_CONFIG=str(work / "cluster.yaml"),
               HPCDET_SITE_CONFIG=str(work / "site.yaml"))

    def cli(*args: str) -> str:
        return subprocess.run([sys.executable, "-m", "hpcdet.cli.main", *args], env=env,
                              check=True, capture_output=True, text=True).stdout

    cli("daemon", "start")  # not part of the makespan
    try:
        start = time.time()
        out = cli("experiment", "create", str(config), str(ctx))
        exp = out.split("Created experiment ")[1].split()[0]
        while True:
            state = json.loads(cli("experiment", "describe", exp, "--json"))["experiment"]["state"]
            if state not in ("ACTIVE", "STOPPING_COMPLETED"):
                break
            time.sleep(0.2)
        took = time.time() - start
        if state != "COMPLETED":
            raise SystemExit(f"the hpcdet search ended {state}; see {work}")
        return took
    finally:
        cli("daemon", "stop")


def main() -> None:
    given = [int(a) for a in sys.argv[1:4]]
    trials, concurrency, repeats = given + [40, 4, 2][len(given):]
    if shutil.which("sbatch") is None:
        raise SystemExit("no sbatch here: start the test cluster (scripts/slurm-test-cluster.sh)")
    results: dict[str, list[float]] = {"baseline": [], "hpcdet": []}
    for _ in range(repeats):
        for name, side in (("baseline", baseline), ("hpcdet", hpcdet)):
            work = Path(tempfile.mkdtemp(prefix=f"hpcdet-bench-{name}-", dir="/tmp"))
            try:
                results[name].append(side(work, trials, concurrency))
            finally:
                shutil.rmtree(work, ignore_errors=True)
    waves = trials / concurrency
    base, ours = (statistics.median(results[k]) for k in ("baseline", "hpcdet"))
    print(f"{trials} trials of 0.5 s, {concurrency} at a time, {repeats} runs each (median)")
    for name, value in (("baseline (bare job array)", base), ("hpcdet random search", ours)):
        runs = ", ".join(f"{v:.1f}" for v in results[name.split()[0]])
        print(f"  {name:28} makespan {value:6.1f} s  ({value / waves:.2f} s per wave; "
              f"runs: {runs})")
    print(f"  hpcdet / baseline: {ours / base:.2f}x; "
          f"hpcdet adds {(ours - base) / waves:.2f} s per wave")


if __name__ == "__main__":
    main()
