"""Submitting a 1,000-trial random search on Slurm: hpcdet's job array against 1,000
individual ``sbatch`` calls of the same script.

Usage: ``python -m bench.slurm_submit [TRIALS [REPEATS]]`` (default 1000 3), on a host whose
``sbatch`` reaches a Slurm cluster (``scripts/slurm-test-cluster.sh start`` makes one); its
MaxArraySize must exceed TRIALS.

hpcdet: the real CLI and daemon (a fresh state directory), ``hpcdet experiment create`` of a
random search of TRIALS trials, timed until the store shows every trial's array task
submitted, then killed; 1 + REPEATS times with one daemon: the figure is the median of the
last REPEATS, and the first (a new state directory: the trial-side tree is built, the templates
compiled) is shown beside it. ``sbatch`` calls the daemon made are counted by a shim in front
of the real ``sbatch``. Baseline, in the same run: TRIALS calls
of ``sbatch --hold`` of hpcdet's own rendered script, one per trial, timed, then cancelled.

Slurm counts each task of an array against MaxJobCount (10,000 on the test cluster), and keeps
a cancelled job's record for MinJobAge (300 s): the repeats and the baseline here count
(1 + REPEATS + 1) x TRIALS, so more than 8 repeats of 1,000 trials within 5 minutes meet the
limit, and hpcdet holds its submissions until Slurm takes them again (seen: 392 s).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.figures import Figure, table
from bench.sandbox import Sandbox

CONFIG = """\
name: bench-submit
entrypoint: python3 -c "import time; time.sleep(600)"
hyperparameters:
  lr: {{type: log, base: 10, minval: -4, maxval: -1}}
searcher: {{name: random, metric: loss, max_trials: {trials}, max_concurrent_trials: 4,
           max_length: 1}}
max_restarts: 0
"""


def measure(trials: int, repeats: int = 3) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp:
        root = Path(tmp)
        box = Sandbox(root, "slurm", count_calls=True)
        times = []
        with box.daemon():
            # The first experiment of a state directory also builds the trial-side tree and
            # the daemon compiles its templates; a daemon a user has had running does neither.
            for _ in range(1 + repeats):
                start = time.perf_counter()
                exp_id = box.create(CONFIG.format(trials=trials))
                box.wait_submitted(exp_id, trials)
                times.append(time.perf_counter() - start)
                box.cli("experiment", "kill", str(exp_id))
            calls = box.calls()["sbatch"] / len(times)
            script = next(box.state.rglob("*.sbatch"), None) or next(box.state.rglob("job.sh"))

        ids = []
        start = time.perf_counter()
        for _ in range(trials):
            done = subprocess.run(["sbatch", "--parsable", "--hold", str(script)],
                                  capture_output=True, text=True, check=True)
            ids.append(done.stdout.strip().split(";")[0])
        each = time.perf_counter() - start
        for i in range(0, len(ids), 500):
            subprocess.run(["scancel", *ids[i:i + 500]], check=False)
    first, warm = times[0], statistics.median(times[1:])
    return [
        Figure("slurm_submit", f"sbatch calls for a {trials:,}-trial random search", calls,
               "calls", "one sbatch per trial", trials, "one sbatch", calls == 1),
        Figure("slurm_submit", f"time to submit {trials:,} trials (create to every task "
               f"queued), median of {repeats} with the daemon running", warm, "s",
               f"{trials:,} individual sbatch calls", each, "≥ 20x faster", each >= 20 * warm,
               note=NOTE),
        Figure("slurm_submit", "the same, the first experiment of a new state directory",
               first, "s", f"{trials:,} individual sbatch calls", each, "", None),
    ]


NOTE = (
    "1.05 s (5.2x) in the full run at 0e12b3e; 0.41 s (14.2x) at 90a1a4f, since typer < 0.28 "
    "(0.28 imported pydantic in every command: hpcdet version 0.20 s, now 0.10 s) and one "
    "compiled batch-script template per daemon (~50 ms a submission before). 0.21-0.33 s "
    "since 17af176 (19-21x in three runs on 2026-11-26): the daemon looked for requests every "
    "0.25 s, so each waited ~0.125 s before it was read (a CLI on the daemon's host now rings "
    "a FIFO, daemon/wake.py; a ping 215 -> 16 ms); the search's first decisions took 24 "
    "journal appends, each with its fsync and transaction (now 6: Journal.record_all); "
    "pathspec was imported for every snapshot (~35 ms; now only with an ignore file). What "
    "is left is mostly the CLI process: ~0.16 s of CPU, of which Python and its site ~0.02 "
    "s, typer ~0.045 s and hpcdet's CLI modules ~0.035 s. This test cluster's sbatch answers "
    "in 3.6-6 ms, against 50 ms to seconds on a production slurmctld under load, where 1,000 "
    "sbatch calls take minutes")


if __name__ == "__main__":
    print(table(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 1000,
                        int(sys.argv[2]) if len(sys.argv) > 2 else 3)))
