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
of the real ``sbatch``. Baseline, in the same run: calls of ``sbatch --hold`` of hpcdet's own
rendered script, one per trial, timed, then cancelled: TRIALS / REPEATS of them beside each of
the last REPEATS creates (taking turns going first), scaled to TRIALS. The target is judged
on the median of each pair's ratio.

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
        ours, base = [], []
        # Each create is paired with a share of the baseline's calls, scaled to TRIALS: this
        # machine's speed drifts over the run, and a pair shares its moment (one run of all
        # TRIALS calls, beside none of the creates, made the ratio 15-24x between runs).
        share = max(1, trials // repeats)
        with box.daemon():
            # The first experiment of a state directory also builds the trial-side tree and
            # the daemon compiles its templates; a daemon a user has had running does neither.
            first = _create(box, trials)
            script = next(box.state.rglob("*.sbatch"), None) or next(box.state.rglob("job.sh"))
            for n in range(repeats):
                if n % 2:  # taking turns going first
                    base.append(_sbatch_each(script, share) * trials / share)
                    ours.append(_create(box, trials))
                else:
                    ours.append(_create(box, trials))
                    base.append(_sbatch_each(script, share) * trials / share)
            calls = box.calls()["sbatch"] / (1 + repeats)
    warm, each = statistics.median(ours), statistics.median(base)
    paired = statistics.median([b / a for a, b in zip(ours, base)])
    baseline = (f"{trials:,} individual sbatch calls ({repeats} x {share:,}, each beside a "
                "create, scaled)")
    return [
        Figure("slurm_submit", f"sbatch calls for a {trials:,}-trial random search", calls,
               "calls", "one sbatch per trial", trials, "one sbatch", calls == 1),
        Figure("slurm_submit", f"time to submit {trials:,} trials (create to every task "
               f"queued), median of {repeats} with the daemon running", warm, "s", baseline,
               each),
        Figure("slurm_submit", f"the same, the calls beside each create over it: median of "
               f"{repeats} pairs' ratios", paired, "x faster", target="≥ 20x faster",
               met=paired >= 20,
               note=f"pairs: hpcdet {', '.join(f'{a:.3f}' for a in ours)} s; the calls, "
               f"scaled, {', '.join(f'{b:.2f}' for b in base)} s. {NOTE}"),
        Figure("slurm_submit", "the same, the first experiment of a new state directory",
               first, "s", baseline, each),
    ]


def _create(box: Sandbox, trials: int) -> float:
    """Seconds from ``experiment create`` to every trial's array task queued; then killed."""
    start = time.perf_counter()
    exp_id = box.create(CONFIG.format(trials=trials))
    box.wait_submitted(exp_id, trials)
    seconds = time.perf_counter() - start
    box.cli("experiment", "kill", str(exp_id))
    return seconds


def _sbatch_each(script: Path, calls: int) -> float:
    """Seconds of ``calls`` calls of ``sbatch --hold script``, one after another; then all
    cancelled."""
    ids = []
    start = time.perf_counter()
    for _ in range(calls):
        done = subprocess.run(["sbatch", "--parsable", "--hold", str(script)],
                              capture_output=True, text=True, check=True)
        ids.append(done.stdout.strip().split(";")[0])
    seconds = time.perf_counter() - start
    for i in range(0, len(ids), 500):
        subprocess.run(["scancel", *ids[i:i + 500]], check=False)
    return seconds


NOTE = (
    "1.05 s (5.2x) in the full run at 0e12b3e; 0.41 s (14.2x) at 90a1a4f, since typer < 0.28 "
    "(0.28 imported pydantic in every command: hpcdet version 0.20 s, now 0.10 s) and one "
    "compiled batch-script template per daemon (~50 ms a submission before). 0.21-0.33 s "
    "since 17af176 (19-21x in three runs on 2026-11-26): the daemon looked for requests every "
    "0.25 s, so each waited ~0.125 s before it was read (a CLI on the daemon's host now rings "
    "a FIFO, daemon/request_bell.py; a ping 215 -> 16 ms); the search's first decisions took 24 "
    "journal appends, each with its fsync and transaction (now 6: Journal.record_all); "
    "pathspec was imported for every snapshot (~35 ms; now only with an ignore file). What "
    "is left is mostly the CLI process: ~0.16 s of CPU, of which Python and its site ~0.02 "
    "s, typer ~0.045 s and hpcdet's CLI modules ~0.035 s. This test cluster's sbatch answers "
    "in 3.6-6 ms, against 50 ms to seconds on a production slurmctld under load, where 1,000 "
    "sbatch calls take minutes. Since 2026-11-28 the baseline's calls are made in shares, "
    "one beside each create, and the target is judged on the median of the pairs' ratios: "
    "the full runs of 2026-11-27 gave 15x (0.336 s against 5.08 s) and 21x (0.212 s against "
    "4.43 s), each against one run of all the calls")


if __name__ == "__main__":
    print(table(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 1000,
                        int(sys.argv[2]) if len(sys.argv) > 2 else 3)))
