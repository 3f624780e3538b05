"""Per-call cost of ``core_context.train.report_training_metrics`` on the cluster path.

Usage: ``python bench/report_metrics.py [N]`` (default 20000).

Builds a temporary run directory and cluster info as the harness would, initialises the Core
API "on the cluster", and times N reports one by one, then N reports each with the
tutorials' ``logging.info`` line. In the same process it times two baselines per call: the
floor (``json.dumps`` and a buffered append to a file) and Determined's model (a synchronous
HTTP POST per report to a local server). It prints medians, p99s and ratios, and checks that
every report reached ``events.jsonl`` exactly once and in order after the context closed.
"""

from __future__ import annotations

import http.client
import http.server
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.figures import Figure, median, p99, table
from hpcdet import core
from hpcdet.errors import HpcdetError
from hpcdet.private import private_dir
from hpcdet.rundir.events import read_events
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


@contextmanager
def on_the_cluster(root: Path) -> Iterator[None]:
    """The Core API "on the cluster" in this process (a run under ``root``) until the block
    ends; then off it again, so that later benchmarks in the process are not."""
    os.environ[CLUSTER_INFO_ENV] = str(fake_run(root))
    try:
        yield
    finally:
        del os.environ[CLUSTER_INFO_ENV]


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


class Sink(http.server.BaseHTTPRequestHandler):
    """A local HTTP server that accepts every report, as a master would (minus the database):
    200 and an empty JSON object, which Determined's client requires."""

    protocol_version = "HTTP/1.1"
    received = 0  # reports, over all servers of the process

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        Sink.received += 1
        # Head and body in one write: in two, Nagle's algorithm holds the body until the
        # client's delayed ACK of the head, 40 ms a report.
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 2\r\n\r\n{}")

    def log_message(self, *args: Any) -> None:
        pass


def http_posts(n: int) -> list[float]:
    """Microseconds per report sent as one synchronous HTTP POST (Determined's model: each
    report is a call to the master), on a kept-alive connection to a local server."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1])

    def post(step: int, m: dict[str, Any]) -> None:
        body = json.dumps({"steps_completed": step, "metrics": m})
        conn.request("POST", "/api/v1/trials/1/metrics", body,
                     {"Content-Type": "application/json"})
        conn.getresponse().read()

    try:
        time_calls(min(n, 200), post)
        return time_calls(n, post)
    finally:
        conn.close()
        server.shutdown()


DETERMINED = "determined==0.38.1"
REPO = Path(__file__).resolve().parents[1]


def determined_python() -> Path:
    """The Python of a bench-only virtualenv with Determined's client, made on first use under
    $XDG_CACHE_HOME/hpcdet-bench (private to the user); hpcdet's own venv never gets it.
    Raises RuntimeError, saying why, when it cannot be made (no package index, say)."""
    # Ours alone (hpcdet.private): a directory another user can write must not decide what
    # Python runs here.
    cache = private_dir(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hpcdet-bench")
    venv = cache / DETERMINED.replace("==", "-")
    python = venv / "bin" / "python"
    if python.exists():
        return python
    for cmd in ([sys.executable, "-m", "venv", "--clear", str(venv)],
                [str(python), "-m", "pip", "install", "-q", DETERMINED]):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            raise RuntimeError(f"{' '.join(cmd[-3:])} failed: {done.stderr.strip()[-300:]}")
    return python


def determined_client(n: int) -> dict[str, Any]:
    """``bench.determined_client`` run with Determined's own client: its figures as JSON."""
    done = subprocess.run([str(determined_python()), "-m", "bench.determined_client", str(n)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"bench.determined_client failed: {done.stderr.strip()[-500:]}")
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    if found["received"] != found["sent"]:
        raise RuntimeError(f"Determined's client sent {found['sent']} reports; the server got "
                           f"{found['received']}")
    return found


def _determined_figures(n: int, ours_us: list[float], close_ms: float) -> list[Figure]:
    name = "report_metrics"
    try:
        theirs = determined_client(n)
    except (RuntimeError, OSError, subprocess.TimeoutExpired, HpcdetError) as e:
        return [Figure(name, f"report_training_metrics against {DETERMINED}'s own client",
                       math.nan, "µs", note=f"not measured: {e}")]
    return [
        Figure(name, "report_training_metrics, median", median(ours_us), "µs",
               f"{DETERMINED}'s own client (a queue; a thread POSTs to a local server)",
               median(theirs["us"])),
        Figure(name, "report_training_metrics, p99", p99(ours_us), "µs",
               f"{DETERMINED}'s own client, p99", p99(theirs["us"])),
        Figure(name, "close(): final flush + fsync", close_ms, "ms",
               f"{DETERMINED}'s close() (its queue drained)", theirs["close_ms"]),
    ]


def measure(n: int, determined: bool = False) -> tuple[list[Figure], bool]:
    """The figures of N reports each way, and whether every report reached events.jsonl
    exactly once and in order. ``determined``: also Determined's own client, in a bench-only
    virtualenv made on first use (the full run; it needs the package index)."""
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp, on_the_cluster(Path(tmp)):
        root = Path(tmp)
        warmup = min(1000, n)
        ctx = core.init()
        ctx.start()
        report = ctx.train.report_training_metrics

        def ours(step: int, m: dict[str, Any]) -> None:
            report(steps_completed=step, metrics=m)

        time_calls(warmup, ours)
        ours_us = time_calls(n, ours, first=warmup + 1)

        # The tutorials' way: logging.basicConfig(level=INFO, format=det.LOG_FORMAT) and a
        # logging.info line per step, here into a file as the harness's log is.
        with open(root / "trial.log", "w") as log_file:
            handler = logging.StreamHandler(log_file)
            handler.setFormatter(logging.Formatter(core.LOG_FORMAT))
            logging.getLogger().addHandler(handler)
            logging.getLogger().setLevel(logging.INFO)

            def logged(step: int, m: dict[str, Any]) -> None:
                logging.info("step %d: loss %s", step, m["loss"])
                report(steps_completed=step, metrics=m)

            logged_us = time_calls(n, logged, first=warmup + n + 1)
            logging.getLogger().removeHandler(handler)
            logging.getLogger().setLevel(logging.WARNING)

        t0 = time.perf_counter()
        ctx.close()
        close_ms = (time.perf_counter() - t0) * 1000

        with open(root / "floor.jsonl", "w") as f:

            def buffered(step: int, m: dict[str, Any]) -> None:
                f.write(json.dumps({"steps_completed": step, "metrics": m}) + "\n")

            floor_us = time_calls(n, buffered)
        post_us = http_posts(n)

        events = read_events(root / "run-1" / "events.jsonl", 0)
        total = warmup + 2 * n
        seqs = [e.seq for e in events]  # a chunk line's reports share its seq
        ok = (
            seqs == sorted(seqs) and set(seqs) == set(range(1, seqs[-1] + 1))
            and [e.body["steps_completed"] for e in events] == list(range(1, total + 1))
            and all(e.type == "metrics" for e in events)
        )

    name = "report_metrics"
    floor, post = median(floor_us), median(post_us)
    figures = [
        Figure(name, "report_training_metrics, median", median(ours_us), "µs",
               "json.dumps + buffered append", floor, "≤ 10 µs and ≤ 2x the floor",
               median(ours_us) <= 10 and median(ours_us) <= 2 * floor),
        Figure(name, "report_training_metrics, p99", p99(ours_us), "µs",
               "json.dumps + buffered append", p99(floor_us), "≤ 50 µs", p99(ours_us) <= 50),
        Figure(name, "report_training_metrics, median", median(ours_us), "µs",
               "one HTTP POST per report (Determined's model)", post),
        Figure(name, "logging.info + report per step, median", median(logged_us), "µs"),
        Figure(name, "logging.info + report per step, p99", p99(logged_us), "µs",
               "report alone, p99", p99(ours_us)),
        Figure(name, "close(): final flush + fsync", close_ms, "ms"),
    ]
    if determined:
        figures += _determined_figures(n, ours_us, close_ms)
    return figures, ok


def main(n: int) -> int:
    figures, ok = measure(n)
    print(f"report_training_metrics, N={n} calls each")
    print(table(figures))
    print(f"events.jsonl: every report once and in order: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000))
