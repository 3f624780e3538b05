"""How long the web UI's experiment page takes to load an experiment of 200 trials with
10,000 training reports each (and 1,000 validations each: 2.2 million metric rows).

Usage: ``python bench/ui_experiment_page.py [TRIALS] [REPORTS] [RUNS]`` (default 200 10000 5).

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
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import uvicorn

from hpcdet.config.experiment import ExperimentConfig
from hpcdet.paths import StatePaths
from hpcdet.store.repository import Store
from hpcdet.ui.app import make_app

CONFIG = {
    "name": "bench", "entrypoint": "python3 train.py",
    "hyperparameters": {"lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1},
                        "layers": {"type": "int", "minval": 1, "maxval": 8}},
    "searcher": {"name": "random", "metric": "validation_loss", "max_trials": 200,
                 "max_length": 10000},
}


def seed(paths: StatePaths, exp_id: int, trials: int, reports: int) -> None:
    """One experiment of ``trials`` trials with ``reports`` training reports each and a
    validation every 10th, in the store's schema."""
    store = Store(paths.database())
    config = ExperimentConfig.from_dict(json.loads(json.dumps(CONFIG))).to_dict()
    rng = random.Random(exp_id)
    now = time.time()
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO experiment (id, name, state, config_json, description, labels_json, "
            "archived, resource_pool, weight, position, backend, searcher, created, "
            "journal_offset, progress, actions_done, searcher_done, error) VALUES "
            "(?, ?, 'COMPLETED', ?, '', '[]', 0, '', 1.0, 0, 'local', 'random', ?, 0, 1.0, 0, "
            "0, '')",
            (exp_id, f"bench-{reports}", json.dumps(config), now))
        first = exp_id * 100_000
        for t in range(first, first + trials):
            hp = {"lr": 10 ** rng.uniform(-4, -1), "layers": rng.randint(1, 8)}
            conn.exec_driver_sql(
                "INSERT INTO trial (id, experiment_id, request_id, ops_json, ops_completed, "
                "closed, stop_requested, early_exit, exit_reported, state, hparams_json, "
                "trial_seed, restarts, run_id, steps_completed, progress, status, "
                "metadata_json, alerts_json, best_validation, end_reason) VALUES "
                "(?, ?, ?, '[]', 0, 1, 0, '', 1, 'COMPLETED', ?, 0, 0, 1, ?, 1.0, '', '{}', "
                "'[]', ?, '')", (t, exp_id, t - first, json.dumps(hp), reports, rng.random()))
            rows = []
            for i in range(reports):
                rows.append((t, i, "training", i + 1, i, json.dumps(
                    {"loss": 1.0 / (i + 1) + rng.random() * 0.01, "accuracy": rng.random()})))
                if i % 10 == 9:
                    rows.append((t, i, "validation", i + 1, i // 10, json.dumps(
                        {"validation_loss": 2.0 / (i + 1), "accuracy": rng.random()})))
            conn.exec_driver_sql(
                "INSERT INTO metric (trial_id, run_id, seq, \"group\", steps_completed, "
                "ordinal, metrics_json, batch_metrics_json, reported) "
                f"VALUES (?, 1, ?, ?, ?, ?, ?, '', {now})", rows)
    store.close()


def serve(paths: StatePaths) -> tuple[str, uvicorn.Server]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(make_app(paths, "bench"), fd=listener.fileno(),
                                           log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{listener.getsockname()[1]}", server


def page_requests(base: str, exp_id: int, group: str, metric: str) -> float:
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
        assert len(got) == TRIALS, len(got)
    return time.perf_counter() - start


def unthinned(paths: StatePaths, exp_id: int, group: str, metric: str) -> float:
    """Seconds to read the group's every row and decode it (the way without thinning)."""
    store = Store(paths.database(), readonly=True)
    start = time.perf_counter()
    values = [json.loads(m.metrics_json).get(metric) for m in
              store.experiment_metrics(exp_id, group)]
    assert values
    store.close()
    return time.perf_counter() - start


def in_browser(base: str, exp_id: int, runs: int) -> list[float] | None:
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
                    return !!option && (option.series || []).length === {TRIALS};
                }}"""):
                page.wait_for_timeout(20)
            times.append(time.perf_counter() - start)
        browser.close()
    return times


def median(f: Callable[..., float], args: tuple[object, ...], runs: int
           ) -> tuple[float, float]:
    """(the first, cold, time; the median of the rest)."""
    times = [f(*args) for _ in range(runs)]
    return times[0], statistics.median(times[1:] or times)


TRIALS = 200

if __name__ == "__main__":
    TRIALS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    reports = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    with tempfile.TemporaryDirectory() as tmp:
        paths = StatePaths(Path(tmp) / "state")
        t0 = time.perf_counter()
        seed(paths, 1, TRIALS, reports)
        seed(paths, 2, TRIALS, 100)
        rows = TRIALS * (reports + reports // 10)
        print(f"seeded {rows:,} metric rows (+ a {TRIALS}x100 baseline) in "
              f"{time.perf_counter() - t0:.0f} s")
        base, server = serve(paths)
        for label, exp, group, metric in [
                ("default view (validation_loss)", 1, "validation", "validation_loss"),
                ("training loss", 1, "training", "loss"),
                ("baseline: 100 reports per trial", 2, "training", "loss")]:
            cold, warm = median(page_requests, (base, exp, group, metric), runs)
            print(f"page requests, {label}: first {cold:.2f} s, median {warm:.2f} s")
            if exp == 1:
                full = unthinned(paths, exp, group, metric)
                print(f"  unthinned read of the same curves: {full:.2f} s "
                      f"({full / warm:.1f}x the whole thinned page)")
        browser = in_browser(base, 1, runs)
        if browser is None:
            print("no Chromium/Playwright here: browser timing skipped")
        else:
            print(f"in Chromium, navigation to {TRIALS} curves drawn: first "
                  f"{browser[0]:.2f} s, median {statistics.median(browser[1:] or browser):.2f} s"
                  f" (limit 2 s)")
        server.should_exit = True
