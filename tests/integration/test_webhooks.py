"""Webhooks end to end on the local backend: `hpcdet webhook create`, a tiny experiment that
calls core_context.alert() and completes, and the posts a real HTTP server on 127.0.0.1
receives; a failing endpoint shows in `daemon status`."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from tests.support import Hpcdet
from tests.unit.notify.receiver import receiving

TRIAL = """\
import determined as det

with det.core.init() as core:
    core.alert(title="halfway", description="loss fell", level="info")
    for op in core.searcher.operations():
        op.report_completed(1.0)
"""


def test_state_changes_and_alerts_reach_their_webhooks(local_hpcdet: Hpcdet,
                                                       tmp_path: Path) -> None:
    h = local_hpcdet
    with receiving() as receiver:
        done = receiver.to("/done/SECRET1")
        alerts = receiver.to("/alerts/SECRET2")
        broken = receiver.to("/broken/SECRET3", [500])
        said = h.run("webhook", "create", done, "--trigger",
                      "experiment-state:COMPLETED,ERROR").stdout
        assert said.startswith(f"Created webhook 1 (webhook-1): default posts to {receiver.url}")
        h.run("webhook", "create", alerts, "--trigger", "custom", "--type", "slack",
              "--name", "alerts", "--mode", "specific")
        h.run("webhook", "create", broken, "-t", "experiment-state:COMPLETED", "-n", "broken")
        bad = h.run("webhook", "create", done, "-t", "experiment-state:FINISHED", check=False)
        assert bad.returncode == 1 and "'FINISHED' is not an experiment state" in bad.stderr
        listed = json.loads(h.run("webhook", "list", "--json").stdout)
        assert [(w["name"], w["url"]) for w in listed] == [
            ("webhook-1", receiver.url), ("alerts", receiver.url), ("broken", receiver.url)]
        registry = h.state / "notify" / "webhooks.json"
        assert stat.S_IMODE(registry.stat().st_mode) == 0o600

        ctx = tmp_path / "ctx"
        ctx.mkdir()
        (ctx / "train.py").write_text(TRIAL)
        cfg = tmp_path / "exp.yaml"
        cfg.write_text("name: notified\nentrypoint: python3 train.py\n"
                       "searcher: {name: single, metric: x, max_length: 1}\n"
                       "integrations: {webhooks: {webhook_name: [alerts]}}\n")
        exp = h.create(cfg, ctx)

        [alert] = receiver.wait_for("/alerts/SECRET2", timeout=30)
        assert [f["text"] for f in alert.body["blocks"][0]["fields"]] == [
            "*Level*: INFO", "*Title*: halfway", "*Description*: loss fell"]
        [post] = receiver.wait_for("/done/SECRET1", timeout=30)
        key = h.run("webhook", "signing-key").stdout.strip()
        assert post.signed_with(key) and alert.signed_with(key)
        assert stat.S_IMODE((h.state / "notify" / "signing-key").stat().st_mode) == 0o600
        assert post.body["event_type"] == "EXPERIMENT_STATE_CHANGE"
        assert post.body["condition"] == {"state": "COMPLETED"}
        experiment = post.body["event_data"]["experiment"]
        assert (experiment["id"], experiment["name"], experiment["state"],
                experiment["slots_per_trial"]) == (exp, "notified", "COMPLETED", 1)
        # Not a SPECIFIC webhook's experiment, and no CUSTOM trigger: nothing else came.
        assert len(receiver.received("/alerts/SECRET2")) == 1

        receiver.wait_for("/broken/SECRET3", timeout=30)
        h.wait_for("the failing webhook in `daemon status`", lambda: (
            f"webhook failing: broken ({receiver.url}): HTTP 500" in
            h.run("daemon", "status", check=False).stdout), timeout=20)
        h.run("webhook", "delete", "broken")
        assert [w["name"] for w in json.loads(h.run("webhook", "list", "--json").stdout)] == [
            "webhook-1", "alerts"]
        assert "SECRET" not in h.daemon_log() + h.run("daemon", "status", check=False).stdout
