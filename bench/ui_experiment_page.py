"""How long the web UI's experiment page takes to load an experiment of 200 trials with
10,000 training reports each (and 1,000 validations each: 2.2 million metric rows).

Usage: ``python -m bench.ui_experiment_page [TRIALS] [REPORTS] [RUNS]`` (default 200 10000 5).

Seeds a real hpcdet database (the store's own schema, rows inserted in bulk rather than through
the daemon, which would take an hour) and serves it with the real `hpcdet ui` application
under uvicorn on a loopback port. Then, RUNS times each, it measures

- the requests the page makes, in its order (the page, its scripts and the plotting library,
  the experiment, its curves) over HTTP: the default view (the searcher metric's validation
  curves) and the training loss curves;
- with Debian's Chromium when it is there (Playwright): from navigation to every trial's
  curve drawn;
- the baseline in the same run: the same experiment at 100 reports per trial, and the curves
  the unthinned way (every row of the group read and decoded, as `trial metrics` does).

It prints medians and ratios; the page must load in under 2 s.
"""

from __future__ import annotations

import json
import random
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import uvicorn

from bench import seed
from bench.figures import Figure, median, table
from hpcdet.paths import StatePaths
from hpcdet.store.queries import Queries
from hpcdet.store.repository import Store
from hpcdet.ui.app import make_app
from hpcdet.ui.door import Door

SEARCHER = {"name": "random", "metric": "validation_loss", "max_trials": 200,
            "max_length": 10000}


def seed_experiment(paths: StatePaths, exp_id: int, trials: int, reports: int) -> None:
    """One experiment of ``trials`` trials with ``reports`` training reports each and a
    validation every 10th, stored as a trial's flushes leave them: the ten training reports
    up to each validation in one chunk."""
    store = Store(paths.database())
    rng = random.Random(exp_id)
    first = exp_id * 100_000
    with store.engine.begin() as conn:
        seed.experiment(conn, exp_id, f"bench-{reports}", seed.config("bench", SEARCHER))
        seed.trials(conn, exp_id, [
            (t, {"lr": 10 ** rng.uniform(-4, -1), "layers": rng.randint(1, 8)}, reports,
             rng.random()) for t in range(first, first + trials)])
        for t in range(first, first + trials):
            rows = []
            for first in range(0, reports, 10):
                steps = list(range(first + 1, min(first + 11, reports + 1)))
                rows.append((t, first, "training", steps, first, [
                    {"loss": 1.0 / x + rng.random() * 0.01, "accuracy": rng.random()}
                    for x in steps]))
                if first + 10 <= reports:
                    rows.append((t, first + 1, "validation", [first + 10], first // 10, [
                        {"validation_loss": 2.0 / (first + 10), "accuracy": rng.random()}]))
            seed.metrics(conn, rows)
    store.close()


def serve(paths: StatePaths) -> tuple[str, uvicorn.Server]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    app = make_app(paths, Door(lambda: "bench", "hpcdet_bench"))
    server = uvicorn.Server(uvicorn.Config(app, fd=listener.fileno(), log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{listener.getsockname()[1]}", server


def page_requests(base: str, exp_id: int, group: str, metric: str, trials: int) -> float:
    """Seconds for the page's requests, in its order, on a fresh connection."""
    start = time.perf_counter()
    with httpx.Client(base_url=base, headers={"Authorization": "Bearer bench"},
                      timeout=120) as c:
        for path in (f"/experiments/{exp_id}", "/static/ui.css",
                     "/static/vendor/echarts-6.1.0.min.js", "/static/ui.js",
                     "/static/experiment.js", f"/api/experiments/{exp_id}"):
            c.get(path).raise_for_status()
        got = c.get(f"/api/experiments/{exp_id}/curves",
                    params={"group": group, "metric": metric}).json()
        assert len(got) == trials, len(got)
    return time.perf_counter() - start


def unthinned(paths: StatePaths, exp_id: int, group: str, metric: str) -> float:
    """Seconds to read the group's every row and decode it (the way without thinning)."""
    store = Queries(paths.database())
    start = time.perf_counter()
    values = [json.loads(m.metrics_json).get(metric) for m in
              store.experiment_metrics(exp_id, group)]
    assert values
    store.close()
    return time.perf_counter() - start


def in_browser(base: str, exp_id: int, trials: int, runs: int) -> list[float] | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path("/usr/bin/chromium").exists():
        return None
    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{base}/?token=bench")
        for _ in range(runs):
            start = time.perf_counter()
            page.goto(f"{base}/experiments/{exp_id}")
            while not page.evaluate(f"""() => {{
                    const box = document.getElementById("curves");
                    const chart = box && window.echarts && echarts.getInstanceByDom(box);
                    const option = chart && chart.getOption();
                    return !!option && (option.series || []).length === {trials};
                }}"""):
                page.wait_for_timeout(20)
            times.append(time.perf_counter() - start)
        browser.close()
    return times


def measure(trials: int, reports: int, runs: int) -> list[Figure]:
    name = "ui_page"
    figures = []
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp:
        paths = StatePaths(Path(tmp) / "state")
        seed_experiment(paths, 1, trials, reports)
        seed_experiment(paths, 2, trials, 100)
        size = f"{trials}x{reports:,}"
        base, server = serve(paths)
        try:
            for label, group, metric in [("default view", "validation", "validation_loss"),
                                         ("training loss", "training", "loss")]:
                times = [page_requests(base, 1, group, metric, trials) for _ in range(runs)]
                small = [page_requests(base, 2, group, metric, trials) for _ in range(runs)]
                figures.append(Figure(
                    name, f"experiment page's requests, {size}, {label}", median(times), "s",
                    f"the same, {trials}x100", median(small), "< 2 s", median(times) < 2))
            full = unthinned(paths, 1, "training", "loss")
            figures.append(Figure(name, f"every training loss report read and decoded, {size}",
                                  full, "s"))
            drawn = in_browser(base, 1, trials, runs)
            if drawn is not None:
                figures.append(Figure(
                    name, f"Chromium: navigation to {trials} curves drawn, {size}",
                    median(drawn[1:] or drawn), "s", "first load", drawn[0], "< 2 s",
                    median(drawn[1:] or drawn) < 2 and drawn[0] < 2))
        finally:
            server.should_exit = True
    return figures


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    print(table(measure(*(args + [200, 10_000, 5][len(args):]))))
