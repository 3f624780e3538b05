"""The web UI in a real headless Chromium (Debian's, driven by Playwright) against a real
`hpcdet ui` over a real daemon on the local backend: an adaptive ASHA experiment that has
finished and a trial that trains while the tests watch. Every page renders without a console
error; the curves hold the reported points; filters and trial choice work; the page follows
training without reloading; a button pauses the experiment. Screenshots of the pages are kept
in $HPCDET_UI_SHOTS (default test-artifacts/ui)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    CHROMIUM,
    CHROMIUM_FLAGS,
    FIXTURES,
    REPO,
    Hpcdet,
    copy_examples,
    ui_server,
)

FLAGS = CHROMIUM_FLAGS
SHOTS = Path(os.environ.get("HPCDET_UI_SHOTS", REPO / "test-artifacts" / "ui"))

playwright_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{CHROMIUM} is missing: scripts/test.sh installs Debian's chromium")
        pytest.skip(f"no {CHROMIUM}")
    root = tmp_path_factory.mktemp("ui")
    h = Hpcdet(root / "user", "local")
    examples = copy_examples(root / "examples")
    asha = h.create(examples / "3_hpsearch_v038.yaml", examples)
    live_ctx = root / "live"
    live_ctx.mkdir()
    shutil.copy(FIXTURES / "ui_live.py", live_ctx / "train.py")
    (root / "live.yaml").write_text(
        "name: ui-live\nentrypoint: python3 train.py\nlabels: [watched]\n"
        "hyperparameters: {lr: 0.1, layers: 3}\n"
        "searcher: {name: single, metric: validation_loss, max_length: 3000}\n")
    live = h.create(root / "live.yaml", live_ctx)
    with ui_server(h) as (base, token):
        h.wait_state(asha, {"COMPLETED"})
        with playwright_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                yield {"h": h, "asha": asha, "live": live, "browser": browser,
                       "base": base, "token": token}
            finally:
                browser.close()
                h.run("experiment", "kill", str(live), check=False)
    h.stop()


class Page:
    """A browser tab that has been through the door, recording console errors."""

    def __init__(self, site: dict[str, Any]) -> None:
        self.base = site["base"]
        self.page = site["browser"].new_page(viewport={"width": 1280, "height": 900})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text)
                     if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(f"{self.base}/?token={site['token']}")

    def open(self, path: str, ready: str) -> Any:
        self.page.goto(self.base + path)
        self.page.wait_for_selector(ready, timeout=30_000)
        return self.page

    def series(self, chart: str) -> list[dict[str, Any]]:
        """The series an ECharts chart of the page draws now."""
        found: list[dict[str, Any]] = self.page.evaluate(
            "id => echarts.getInstanceByDom(document.getElementById(id)).getOption().series"
            ".map(s => ({name: s.name, data: s.data}))", chart)
        return found

    def until(self, expression: str, timeout: float = 30) -> None:
        """Wait for a JavaScript expression to hold (Playwright's wait_for_function evaluates
        its string with eval, which the UI's Content-Security-Policy rightly refuses)."""
        deadline = time.monotonic() + timeout
        while not self.page.evaluate(f"() => Boolean({expression})"):
            assert time.monotonic() < deadline, f"not within {timeout} s: {expression}"
            self.page.wait_for_timeout(250)

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.fixture
def tab(site: dict[str, Any]) -> Iterator[Page]:
    page = Page(site)
    yield page
    page.page.close()


def test_every_page_renders_without_console_errors(site: dict[str, Any], tab: Page) -> None:
    asha, live = site["asha"], site["live"]
    pages = [("experiments", "/", f"#experiments tr[data-id='{live}']"),
             ("experiment", f"/experiments/{asha}", "#trials tr[data-trial]"),
             ("experiment-live", f"/experiments/{live}", "#trials tr[data-trial]"),
             ("trial", "/trials/1", "#checkpoints tbody tr"),
             ("queue", "/queue", f"#queue tr[data-job='{live}']"),
             ("cluster", "/cluster", "#cluster tbody tr")]
    for name, path, ready in pages:
        page = tab.open(path, ready)
        page.wait_for_timeout(1500)  # the charts' first draw and a poll
        tab.shot(name)
    assert tab.errors == []
    assert "local" in tab.page.inner_text("#backend")


def test_curves_hold_the_reported_points(site: dict[str, Any], tab: Page) -> None:
    h, asha = site["h"], site["asha"]
    page = tab.open(f"/experiments/{asha}", "#trials tr[data-trial]")
    tab.until("document.getElementById('metric').value === 'x'")
    assert page.input_value("#group") == "validation"
    drawn = {int(s["name"].split()[-1]): [tuple(p) for p in s["data"]]
             for s in tab.series("curves")}
    trials = [t["id"] for t in h.describe(asha)["trials"]]
    assert sorted(drawn) == sorted(trials)
    for trial in trials:
        reported = [(m["steps_completed"], m["metrics"]["x"]) for m in h.metrics(trial)
                    if m["group"] == "validation"]
        assert drawn[trial] == reported, trial
    # Every trial's last x against its hyperparameter, and the rungs ASHA stopped them at.
    scatter = tab.series("scatter")[0]["data"]
    assert len(scatter) == len(trials)
    rungs = tab.series("rungs")[0]["data"]
    assert {p["value"][0] for p in rungs} == {"25", "100"}
    assert tab.errors == []


def test_filters_and_trial_choice(site: dict[str, Any], tab: Page) -> None:
    asha, live = site["asha"], site["live"]
    page = tab.open("/", f"#experiments tr[data-id='{live}']")
    page.select_option("#filter-state", "COMPLETED")
    assert page.locator("#experiments tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.id)") == [str(asha)]
    page.select_option("#filter-state", "")
    page.fill("#filter-label", "watched")
    assert page.locator("#experiments tbody tr").count() == 1
    assert page.get_attribute("#experiments tbody tr", "data-id") == str(live)

    page = tab.open(f"/experiments/{asha}", "#trials tr[data-trial='2']")
    page.click("#trials tr[data-trial='2'] td:nth-child(2)")
    assert [s["name"] for s in tab.series("curves")] == ["trial 2"]
    page.check("#log-scale")
    assert page.evaluate("echarts.getInstanceByDom(document.getElementById('curves'))"
                         ".getOption().yAxis[0].type") == "log"
    page.click("#all-trials")
    assert len(tab.series("curves")) == 10
    # Issue 37: a tooltip is HTML, and what it shows is the user's text (CSP aside).
    shown = page.evaluate(
        "echarts.getInstanceByDom(document.getElementById('scatter')).getOption().tooltip[0]"
        ".formatter({name: 'trial 1', value: ['<img src=x onerror=alert(1)>', 0.5]})")
    assert "<img" not in shown and "&#60;img src=x onerror=alert(1)&#62;" in shown, shown

    live_trial = site["h"].describe(live)["trials"][0]["id"]
    page = tab.open(f"/trials/{live_trial}", "#logs")
    tab.until("document.getElementById('logs').textContent.includes('careful')", timeout=60)
    page.select_option("#log-level", "WARNING")
    tab.until("document.getElementById('logs').textContent.includes('careful')")
    lines = page.inner_text("#logs").strip().splitlines()
    assert lines and all("WARNING" in line for line in lines), lines[:5]
    assert tab.errors == []


def test_the_page_follows_training_and_an_action_pauses(site: dict[str, Any], tab: Page
                                                        ) -> None:
    h, live = site["h"], site["live"]
    page = tab.open(f"/experiments/{live}", "#trials tr[data-trial]")
    page.select_option("#group", "training")
    tab.until("document.getElementById('metric').value === 'loss'")
    page.evaluate("window.notReloaded = true")

    def points() -> int:
        series = tab.series("curves")
        return len(series[0]["data"]) if series else 0

    tab.until("window.notReloaded && echarts.getInstanceByDom("
              "document.getElementById('curves')).getOption().series.length")
    before = points()
    deadline = time.monotonic() + 60
    while points() <= before + 5 and time.monotonic() < deadline:
        page.wait_for_timeout(1000)
    assert points() > before + 5 and page.evaluate("window.notReloaded") is True
    assert all(abs(y - 1.0 / x) < 1e-9 for x, y in tab.series("curves")[0]["data"])

    page.click("button[data-action='pause']")
    tab.until(
        "document.querySelector(\"dd[data-fact='state']\").textContent === 'PAUSED'",
        timeout=60)
    assert h.describe(live)["experiment"]["state"] == "PAUSED"
    page.click("button[data-action='activate']")
    h.wait_state(live, {"ACTIVE"})
    assert tab.errors == []
