"""Submitting a 1,000-trial random search on Slurm: hpcdet's job array against 1,000
individual ``sbatch`` calls of the same script.

Usage: ``python -m bench.slurm_submit [TRIALS]`` (default 1000), on a host whose ``sbatch``
reaches a Slurm cluster (``scripts/slurm-test-cluster.sh start`` makes one); its MaxArraySize
must exceed TRIALS.

hpcdet: the real CLI and daemon (a fresh state directory), ``hpcdet experiment create`` of a
random search of TRIALS trials, timed until the store shows every trial's array task
submitted; the figure counts the ``sbatch`` calls it made (its job arrays). The experiment is
then killed. Baseline, in the same run: TRIALS calls of ``sbatch --hold`` of hpcdet's own
rendered script, one per trial, timed, then cancelled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.figures import Figure, table
from hpcdet.store.repository import Store

CONFIG = """\
name: bench-submit
entrypoint: python3 -c "import time; time.sleep(600)"
hyperparameters:
  lr: {{type: log, base: 10, minval: -4, maxval: -1}}
searcher: {{name: random, metric: loss, max_trials: {trials}, max_concurrent_trials: 4,
           max_length: 1}}
max_restarts: 0
"""


def _hpcdet(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "hpcdet.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"hpcdet {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def measure(trials: int) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp:
        root = Path(tmp)
        (root / "cluster.yaml").write_text("backend: slurm\n")
        (root / "site.yaml").write_text("{}\n")
        (root / "ctx").mkdir()
        (root / "cfg.yaml").write_text(CONFIG.format(trials=trials))
        env = {**os.environ, "HPCDET_HOME": str(root / "state"),
               "HPCDET_CLUSTER_CONFIG": str(root / "cluster.yaml"),
               "HPCDET_SITE_CONFIG": str(root / "site.yaml")}
        _hpcdet(env, "daemon", "start")
        try:
            start = time.perf_counter()
            out = _hpcdet(env, "experiment", "create", str(root / "cfg.yaml"), str(root / "ctx"))
            exp_id = int(out.split("Created experiment ")[1].split()[0])
            store = Store(root / "state" / "hpcdet.db", readonly=True)
            while True:
                arrays = store.arrays(exp_id)
                covered = sum(a.count for a in arrays if a.job_id)
                if covered >= trials:
                    break
                if time.perf_counter() - start > 600:
                    raise RuntimeError(f"only {covered} of {trials} trials submitted in 600 s")
                time.sleep(0.05)
            ours = time.perf_counter() - start
            calls = len(arrays)
            script = next((root / "state").rglob("*.sbatch"), None) or next(
                (root / "state").rglob("job.sh"))
            _hpcdet(env, "experiment", "kill", str(exp_id))
        finally:
            _hpcdet(env, "daemon", "stop")

        ids = []
        start = time.perf_counter()
        for _ in range(trials):
            done = subprocess.run(["sbatch", "--parsable", "--hold", str(script)],
                                  capture_output=True, text=True, check=True)
            ids.append(done.stdout.strip().split(";")[0])
        each = time.perf_counter() - start
        for i in range(0, len(ids), 500):
            subprocess.run(["scancel", *ids[i:i + 500]], check=False)
    return [
        Figure("slurm_submit", f"sbatch calls for a {trials:,}-trial random search", calls,
               "calls", "one sbatch per trial", trials, "one sbatch", calls == 1),
        Figure("slurm_submit", f"time to submit {trials:,} trials (create to every task "
               "queued)", ours, "s", f"{trials:,} individual sbatch calls", each,
               "≥ 20x faster", each >= 20 * ours,
               note="this test cluster's sbatch answers in about 6 ms, so hpcdet's fixed "
               "cost (the CLI's start, the context snapshot, the daemon's tick) dominates; a "
               "production slurmctld under load takes 50 ms to seconds per sbatch. Next: "
               "measure against a loaded controller"),
    ]


if __name__ == "__main__":
    print(table(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)))
