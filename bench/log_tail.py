"""The tail of a huge node log: `hpcdet trial logs --tail 200` and the UI's first log page.

Usage: ``python -m bench.log_tail [MIB] [RUNS]`` (default 1024 3).

Writes a real node log of MIB MiB (stamped lines, as the harness writes them) in a temporary
directory, then reads its last 200 lines RUNS times, each in a new process that reports its
time and peak RSS (``ru_maxrss``, the interpreter and hpcdet's imports included): through
``hpcdet.views.logs.trial_log`` (what `trial logs --tail` and a follow's start read) and
``log_page`` (the UI's first view). The baseline in the same run, on the same file: coreutils
``tail -n 200``, its RSS measured the same way (``RUSAGE_CHILDREN`` of a wrapper).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from bench.figures import Figure, median, table
from hpcdet.paths import StatePaths

HPCDET = textwrap.dedent("""
    import json, resource, sys, time
    from pathlib import Path
    from hpcdet.paths import StatePaths
    from hpcdet.views.logs import LogFilter, log_page, trial_log
    paths = StatePaths(Path(sys.argv[1]))
    start = time.perf_counter()
    if sys.argv[2] == "cli":
        assert len(trial_log(paths, 1, 1, LogFilter(tail=200))) == 200
    else:
        assert len(log_page(paths, 1, 1, {}, 2000)[0]) == 2000
    took = time.perf_counter() - start
    print(json.dumps([took, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))
""")
TAIL = textwrap.dedent("""
    import json, os, resource, sys, time
    out = os.open(os.devnull, os.O_WRONLY)
    start = time.perf_counter()
    pid = os.posix_spawnp("tail", ["tail", "-n", "200", sys.argv[1]], os.environ,
                          file_actions=[(os.POSIX_SPAWN_DUP2, out, 1)])
    assert os.waitpid(pid, 0)[1] == 0
    took = time.perf_counter() - start
    print(json.dumps([took, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024]))
""")
# A log view's memory must not grow with the log: the interpreter and imports take ~18 MiB.
RSS_TARGET_MIB = 100
NOTE = ("tail's peak RSS is an upper bound: the kernel carries the spawning Python's ~10 MiB "
        "high-water mark across exec. Before issue 37 a view read the whole log: ~480 MiB "
        "of RSS for the tail of a 96 MiB log (tests/unit/views/test_log_tail.py on the old "
        "code)")


def write_log(path: Path, mib: int) -> None:
    path.parent.mkdir(parents=True)
    with open(path, "wb") as f:
        for block in range(mib):
            f.write(b"".join(b"2026-11-28T09:00:%02d.%06dZ [rank=0] INFO: step %010d loss "
                             b"0.125 accuracy 0.875 lr 0.001 throughput 1234.5\n"
                             % (block % 60, i, block * 8000 + i) for i in range(8000))[:2**20])


def _child(program: str, *args: str) -> tuple[float, float]:
    done = subprocess.run([sys.executable, "-c", program, *args], capture_output=True,
                          text=True, check=True)
    took, rss = json.loads(done.stdout)
    return float(took), float(rss)


def measure(mib: int, runs: int) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp:
        state = Path(tmp) / "state"
        log = StatePaths(state).run(1, 1, 1) / "logs" / "node-0.log"
        write_log(log, mib)
        base = [_child(TAIL, str(log)) for _ in range(runs)]
        figures = []
        for what, mode in [("trial logs --tail 200", "cli"), ("UI log page, first view",
                                                               "ui")]:
            got = [_child(HPCDET, str(state), mode) for _ in range(runs)]
            took, rss = median([g[0] for g in got]), max(g[1] for g in got)
            size = f"{mib:,} MiB log"
            figures += [
                Figure("log_tail", f"{what}, {size}: time", took, "s", "tail -n 200",
                       median([b[0] for b in base])),
                Figure("log_tail", f"{what}, {size}: peak RSS", rss, "MiB",
                       "tail -n 200", max(b[1] for b in base),
                       f"< {RSS_TARGET_MIB} MiB at any log size", rss < RSS_TARGET_MIB,
                       NOTE),
            ]
    return figures


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    print(table(measure(*(args + [1024, 3][len(args):]))))
