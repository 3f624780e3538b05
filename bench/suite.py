"""Every benchmark, at full size or as a smoke run: ``bench/run [--smoke] [NAME...]``.

A full run prints the table and writes bench/RESULTS.md (the machine, the date, the commit,
each figure with its baseline, ratio and target, and the missed targets). A smoke run measures
the same code paths at a few seconds' size: it fails only when a benchmark fails, never on a
figure, and writes nothing.

Each benchmark runs in a process of its own: in one process for all, what the earlier ones
left (threads, a heap of objects every garbage collection walks) was measured with the later
ones, and with the code that allocates more per step more than with its baseline.
"""

from __future__ import annotations

import argparse
import compileall
import dataclasses
import datetime
import importlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.figures import Figure, markdown, table

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "RESULTS.md"


@dataclass(frozen=True)
class Bench:
    name: str
    full: Callable[[], list[Figure]]
    smoke: Callable[[], list[Figure]]


def _report_metrics(n: int, determined: bool) -> Callable[[], list[Figure]]:
    def run() -> list[Figure]:
        from bench.report_metrics import measure

        figures, ok = measure(n, determined)
        if not ok:
            raise RuntimeError("events.jsonl did not hold every report once and in order")
        return figures
    return run


def _lazy(module: str, *args: object) -> Callable[[], list[Figure]]:
    """The module's ``measure(*args)``, imported only when it runs (torch, playwright...)."""
    def run() -> list[Figure]:
        measure: Callable[..., list[Figure]] = importlib.import_module(
            f"bench.{module}").measure
        return measure(*args)
    return run


BENCHES = [
    Bench("report_metrics", _report_metrics(20_000, True), _report_metrics(300, False)),
    Bench("ingest", _lazy("ingest", 100_000, 5), _lazy("ingest", 2_000, 1)),
    Bench("checkpoint_io", _lazy("checkpoint_io", 1024, 4), _lazy("checkpoint_io", 8, 1)),
    Bench("asha_sim", _lazy("asha_sim", 10_000), _lazy("asha_sim", 300)),
    Bench("ui_page", _lazy("ui_experiment_page", 200, 10_000, 5),
          _lazy("ui_experiment_page", 5, 200, 1)),
    Bench("cli_listing", _lazy("cli_listing", 10_000, 5), _lazy("cli_listing", 50, 1)),
    Bench("remote", _lazy("remote", 10), _lazy("remote", 1)),
    Bench("log_tail", _lazy("log_tail", 1024, 3), _lazy("log_tail", 64, 1)),
    Bench("pytorch", _lazy("pytorch_throughput", 20, 21), _lazy("pytorch_throughput", 1, 1)),
    Bench("pytorch_ddp", _lazy("pytorch_ddp", 20, 9), _lazy("pytorch_ddp", 1, 1, False, 2)),
    Bench("slurm_submit", _lazy("slurm_submit", 1000, 5), _lazy("slurm_submit", 20)),
    Bench("daemon_load", _lazy("daemon_load", 60), _lazy("daemon_load", 4, (10, 20), 10, 10)),
    Bench("decision_latency", _lazy("decision_latency", 16), _lazy("decision_latency", 2)),
    Bench("allgather", _lazy("allgather", 200), _lazy("allgather", 10)),
    Bench("packing", _lazy("packing", 200, 30, 8), _lazy("packing", 8, 2, 8)),
]


def _isolated(bench: Bench, smoke: bool) -> list[Figure]:
    """The benchmark's figures, measured by a new interpreter (``--one``)."""
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp:
        out = Path(tmp) / "figures.json"
        done = subprocess.run([sys.executable, "-m", "bench.suite", "--one", bench.name,
                               "--out", str(out), *(["--smoke"] if smoke else [])], cwd=REPO)
        if done.returncode != 0:
            raise RuntimeError(f"{bench.name} exited with {done.returncode}")
        return [Figure(**f) for f in json.loads(out.read_text())]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kb / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return (f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs ({cpu}){memory}, "
            f"Python {platform.python_version()}")


def commit() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"],
                           capture_output=True, text=True).stdout.strip()
    return done.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


def write_results(figures: list[Figure], took: dict[str, float], failed: list[str]) -> None:
    lines = [
        "# Benchmark results",
        "",
        "Written by `bench/run` (a full run); every figure is a median over repeats, and each",
        "baseline was measured in the same run on the same machine. The ratio is the value",
        "divided by the baseline's (for times, below 1 is faster). Rerun it to refresh.",
        "",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {machine()}",
        f"- Commit: {commit()}",
        "- Time per benchmark: " + ", ".join(f"{k} {v:.0f} s" for k, v in took.items()),
        "",
        markdown(figures),
    ]
    if failed:
        lines += ["", "Benchmarks that failed: " + ", ".join(failed)]
    RESULTS.write_text("\n".join(lines) + "\n")


def _byte_compile() -> None:
    """Compile hpcdet's modules as ``pip install`` does. Without it, a tree whose modules no
    process wrote bytecode for (under PYTHONDONTWRITEBYTECODE, which these machines set) has
    every CLI process compile them again: ~7 ms a start of `hpcdet experiment create`."""
    for package in ("hpcdet", "cli", "launchers"):
        compileall.compile_dir(REPO / package, quiet=1)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="small sizes, fail only on errors, write nothing")
    parser.add_argument("names", nargs="*", help=f"some of: {', '.join(b.name for b in BENCHES)}")
    # What each benchmark's own process is given (_isolated): NAME, and where its figures go.
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = set(args.names + ([args.one] if args.one else [])) - {b.name for b in BENCHES}
    if unknown:
        parser.error(f"no benchmark {', '.join(sorted(unknown))}")
    if args.one:
        bench = next(b for b in BENCHES if b.name == args.one)
        got = (bench.smoke if args.smoke else bench.full)()
        Path(args.out).write_text(json.dumps([dataclasses.asdict(f) for f in got]))
        return 0
    chosen = [b for b in BENCHES if not args.names or b.name in args.names]
    _byte_compile()
    figures: list[Figure] = []
    took: dict[str, float] = {}
    failed: list[str] = []
    for bench in chosen:
        print(f"[bench] {bench.name}{' (smoke)' if args.smoke else ''}", flush=True)
        start = time.monotonic()
        try:
            got = _isolated(bench, args.smoke)
        except Exception:
            traceback.print_exc()
            failed.append(bench.name)
            continue
        took[bench.name] = time.monotonic() - start
        print(table(got), flush=True)
        figures += got
    print()
    print(table(figures))
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    if not args.smoke and not args.names:
        write_results(figures, took, failed)
        print(f"\nwrote {RESULTS.relative_to(REPO)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
