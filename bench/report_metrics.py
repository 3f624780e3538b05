"""Per-call cost of ``core_context.train.report_training_metrics`` on the cluster path.

Usage: ``python bench/report_metrics.py [N]`` (default 20000).

Builds a temporary run directory and cluster info as the harness would, initialises the Core
API "on the cluster", and times N reports one by one. In the same process it times two
baselines per call: the least any buffered reporter must do (copy the dict, append it to a
list) and the naive synchronous reporter (``json.dumps`` + ``write`` + ``flush``). It prints
median and p99 in microseconds, the ratios, and then checks that every report reached
``events.jsonl`` exactly once and in order after the context closed.
"""

from __future__ import annotations

import io
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hpcdet import core
from hpcdet.rundir.exchange import read_events
from hpcdet.rundir.spec import CLUSTER_INFO_ENV, ClusterInfoRecord, RunSpec


def fake_run(root: Path) -> Path:
    """Write job.json and a cluster info record under ``root``; return the record's path."""
    run_dir = root / "run-1"
    spec = RunSpec(
        experiment_id=1, trial_id=1, run_id=1, trial_seed=0, hparams={},
        config={"searcher": {"name": "single", "metric": "loss"}}, entrypoint="python3 x.py",
        context_dir=str(root / "context"), run_dir=str(run_dir),
        checkpoint_dir=str(root / "checkpoints"),
    )
    spec.save(run_dir)
    info = run_dir / "nodes" / "0.json"
    ClusterInfoRecord(
        spec=asdict(spec), container_addrs=["127.0.0.1"], container_rank=0, slot_ids=[0],
        agent_id="bench", allocation_id="1.1", task_id="1.1",
    ).save(info)
    return info


def metrics(step: int) -> dict[str, Any]:
    return {"loss": 1.0 / step, "accuracy": 0.5 + step * 1e-6, "lr": 1e-3, "epoch": step // 500}


def time_calls(n: int, call: Callable[[int, dict[str, Any]], None], first: int = 1) -> list[float]:
    """Microseconds per call; the metrics dict is built outside the timed region."""
    clock = time.perf_counter_ns
    out = []
    for step in range(first, first + n):
        m = metrics(step)
        t0 = clock()
        call(step, m)
        out.append((clock() - t0) / 1000)
    return out


def p99(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=100)[98]


def main(n: int) -> int:
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp:
        root = Path(tmp)
        os.environ[CLUSTER_INFO_ENV] = str(fake_run(root))
        warmup = 1000
        ctx = core.init()
        ctx.start()
        report = ctx.train.report_training_metrics

        def ours(step: int, m: dict[str, Any]) -> None:
            report(steps_completed=step, metrics=m)

        time_calls(warmup, ours)
        ours_us = time_calls(n, ours, first=warmup + 1)

        # Same reports with the tutorials' logging.basicConfig(level=DEBUG): the INFO log line
        # of every report is then part of its cost (here into memory, not a terminal).
        handler = logging.StreamHandler(io.StringIO())
        handler.setFormatter(logging.Formatter(core.LOG_FORMAT))
        log = logging.getLogger("hpcdet.core")
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        logged_us = time_calls(n, ours, first=warmup + n + 1)
        log.removeHandler(handler)
        log.setLevel(logging.NOTSET)

        t0 = time.perf_counter()
        ctx.close()
        close_ms = (time.perf_counter() - t0) * 1000

        sink: list[dict[str, Any]] = []

        def copy_append(step: int, m: dict[str, Any]) -> None:
            sink.append(dict(m))

        copy_us = time_calls(n, copy_append)

        with open(root / "sync.jsonl", "w") as f:

            def sync_write(step: int, m: dict[str, Any]) -> None:
                f.write(json.dumps({"steps_completed": step, "metrics": m}) + "\n")
                f.flush()

            sync_us = time_calls(n, sync_write)

        events = read_events(root / "run-1" / "events.jsonl", 0)
        total = warmup + 2 * n
        steps = [e.body["steps_completed"] for e in events]
        ok = (
            len(events) == total
            and [e.seq for e in events] == list(range(1, total + 1))
            and steps == list(range(1, total + 1))
            and all(e.type == "metrics" for e in events)
        )

    rows = [
        ("report_training_metrics", ours_us),
        ("  same, INFO log to memory", logged_us),
        ("baseline: dict copy + append", copy_us),
        ("baseline: json+write+flush", sync_us),
    ]
    print(f"report_training_metrics, N={n} calls each (after {warmup} warm-up calls)")
    print(f"{'':32} {'median µs':>10} {'p99 µs':>10}")
    for name, xs in rows:
        print(f"{name:32} {statistics.median(xs):10.2f} {p99(xs):10.2f}")
    med, tail = statistics.median(ours_us), p99(ours_us)
    for name, xs in rows[2:]:
        print(
            f"ours / {name.split(': ')[1]:22} median x{med / statistics.median(xs):6.2f}"
            f"   p99 x{tail / p99(xs):6.2f}"
        )
    print(f"close() (final flush + fsync): {close_ms:.1f} ms")
    print(f"events.jsonl: {len(events)} events, expected {total}: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000))
