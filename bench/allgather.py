"""``allgather`` among a trial's workers, 4 ranks on 2 nodes: the TCP path against MPI.

Usage: ``python -m bench.allgather [REPEATS]`` (default 200), on a host whose ``sbatch``
reaches a Slurm cluster of two nodes (``scripts/slurm-test-cluster.sh start`` makes one) and
whose Python has mpi4py.

One job of 2 nodes × 2 tasks runs two steps of the same worker: one builds the Core API's
``DistributedContext.from_mpi4py()`` (``srun --mpi=pmi2``), the other
``DistributedContext.from_slurm()``, whose collectives go over TCP through the relay in the
chief's process. Each times REPEATS allgathers of a small object (a dict of two numbers) and
of 1 MiB of bytes, after a few for warm-up; rank 0 prints the times.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.figures import Figure, median, p99, table

WORKER = """
import json, sys, time
from hpcdet import core

mode, repeats = sys.argv[1], int(sys.argv[2])
D = core.DistributedContext
d = D.from_mpi4py() if mode == "mpi" else D.from_slurm()
out = {"mode": mode, "transport": type(d._transport).__name__}
for name, obj in (("small", {"rank": d.rank, "loss": 0.5}), ("1MiB", bytes(1 << 20))):
    for _ in range(5):
        d.allgather(obj)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        got = d.allgather(obj)
        times.append(time.perf_counter() - start)
    assert len(got) == d.size == 4, (len(got), d.size)
    out[name] = times
if d.rank == 0:
    print("RESULT " + json.dumps(out), flush=True)
d.close()
"""


MPI_NOTE = ("not hpcdet's: mpi4py's own allgather over MPICH, whose ranks poll while they wait; "
            "here 4 ranks share 2 cores, so under load a rank waits for the others' time "
            "slices (5.9 ms median with other work running), while the TCP relay's ranks "
            "block in the kernel. On an otherwise idle machine MPI is the faster (79 µs against "
            "the relay's 188 µs in a smoke run on 2026-11-25)")


def _run(repeats: int) -> dict[str, dict[str, list[float]]]:
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp:
        root = Path(tmp)
        (root / "worker.py").write_text(WORKER)
        job = root / "job.sh"
        job.write_text(
            f"#!/bin/bash\nset -e\nPY={sys.executable}\nW={root / 'worker.py'}\n"
            f'srun --mpi=pmi2 "$PY" "$W" mpi {repeats}\n'
            f'srun "$PY" "$W" tcp {repeats}\n')
        out = root / "job.out"
        done = subprocess.run(
            ["sbatch", "--wait", "--nodes=2", "--ntasks-per-node=2", "--time=10",
             f"--output={out}", "--job-name=hpcdet-bench-allgather", str(job)],
            capture_output=True, text=True, timeout=900)
        text = out.read_text() if out.exists() else ""
        if done.returncode != 0:
            raise RuntimeError(f"the allgather job failed ({done.stderr.strip()}):\n{text}")
    rows = [json.loads(line[len("RESULT "):]) for line in text.splitlines()
            if line.startswith("RESULT ")]
    return {r["mode"]: r for r in rows}


def measure(repeats: int) -> list[Figure]:
    got = _run(repeats)
    if set(got) != {"mpi", "tcp"}:
        raise RuntimeError(f"results of {sorted(got)} only")
    us = {m: {k: [1e6 * x for x in got[m][k]] for k in ("small", "1MiB")} for m in got}
    figures = []
    for name, label, target, limit in (
            ("small", "a small object", "≤ 1 ms", 1000.0), ("1MiB", "1 MiB", "", None)):
        tcp, mpi = median(us["tcp"][name]), median(us["mpi"][name])
        figures += [
            Figure("allgather", f"TCP relay, {label}, 4 ranks on 2 nodes, median", tcp, "µs",
                   "MPI (mpi4py, pmi2)", mpi, target, None if limit is None else tcp <= limit),
            Figure("allgather", f"TCP relay, {label}, p99", p99(us["tcp"][name]), "µs",
                   "MPI, p99", p99(us["mpi"][name])),
        ]
        if limit is not None:
            figures.append(Figure("allgather", f"MPI, {label}, median", mpi, "µs",
                                  target=target, met=mpi <= limit, note=MPI_NOTE))
    return figures


if __name__ == "__main__":
    start = time.monotonic()
    print(table(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 200)))
    print(f"{time.monotonic() - start:.0f} s")
