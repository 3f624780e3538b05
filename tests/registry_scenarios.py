"""The model registry through the CLI and the SDK, shared by the backends: `hpcdet model
create/list/describe/register-version/download`, the SDK's models, checkpoint GC keeping a
registered checkpoint that its policy deletes, and the registry rebuilt with the database."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

from tests.support import Hpcdet

SCRIPT = """
import os, time
import determined as det

with det.core.init() as core_context:
    for steps in (10, 20, 30):
        with core_context.checkpoint.store_path({{"steps_completed": steps}}) as (path, _):
            (path / "state").write_text(str(steps))
        core_context.train.report_validation_metrics(steps_completed=steps,
                                                     metrics={{"x": steps}})
    for _ in range(3000):  # until the test has registered a checkpoint
        if os.path.exists({release!r}):
            break
        time.sleep(0.1)
"""

# GC keeps nothing of an ended trial: only the registered checkpoint may stay.
CONFIG = """
name: registry
entrypoint: python3 train.py
searcher: {{name: single, metric: x, smaller_is_better: false, max_length: 1}}
max_restarts: 0
checkpoint_storage:
  type: shared_fs
  host_path: {storage}
  save_experiment_best: 0
  save_trial_best: 0
  save_trial_latest: 0
"""

SDK = """
import json, sys
from hpcdet import client

model = client.create_model("sdk-model", description="from the SDK", metadata={"k": 1})
assert model.get_version() is None
version = model.register_version(client.get_checkpoint(sys.argv[1]))
again = client.get_model("mnist").register_version(sys.argv[1])
latest = client.get_model("sdk-model").get_version()
print(json.dumps({
    "versions": [version.model_version, again.model_version, latest.model_version],
    "descending": [v.model_version for v in client.get_model("mnist").get_versions()],
    "uuid": latest.checkpoint.uuid,
    "steps": latest.checkpoint.steps_completed,
    "models": [m.name for m in client.get_models()],
    "path": latest.checkpoint.download(sys.argv[2]),
}))
"""


def _uuids(h: Hpcdet, exp: int) -> list[str]:
    rows = csv.DictReader(io.StringIO(h.run("checkpoint", "list", str(exp), "--csv").stdout))
    return [r["UUID"] for r in rows]


def registered_checkpoints_outlive_gc_deletes_and_a_rebuild(h: Hpcdet, tmp_path: Path) -> None:
    ctx, storage, release = tmp_path / "ctx", tmp_path / "storage", tmp_path / "release"
    ctx.mkdir()
    (ctx / "train.py").write_text(SCRIPT.format(release=str(release)))
    (ctx / "config.yaml").write_text(CONFIG.format(storage=storage))
    exp = h.create(ctx / "config.yaml", ctx)
    h.wait_for("three checkpoints", lambda: len(_uuids(h, exp)) == 3, timeout=240)
    by_steps = {json.loads((storage / u / "metadata.json").read_text())["steps_completed"]: u
                for u in _uuids(h, exp)}

    h.run("model", "create", "mnist", "--description", "a cnn")
    refused = h.run("model", "create", "mnist", check=False)
    assert refused.returncode != 0 and "already exists" in refused.stderr, refused
    bad = h.run("model", "create", "a/b", check=False)
    assert bad.returncode != 0 and "holds '/'" in bad.stderr, bad
    out = h.run("model", "register-version", "mnist", by_steps[20]).stdout
    assert "as version 1 of model 'mnist'" in out, out
    missing = h.run("model", "register-version", "mnist", "no-such-uuid", check=False)
    assert missing.returncode != 0 and "checkpoint no-such-uuid not found" in missing.stderr

    release.touch()
    assert h.wait_state(exp, {"COMPLETED"})["experiment"]["state"] == "COMPLETED"
    h.wait_for("GC of the unregistered checkpoints", lambda: _uuids(h, exp) == [by_steps[20]])
    assert sorted(p.name for p in storage.iterdir()) == [by_steps[20]]
    deleted = h.run("checkpoint", "delete", by_steps[20], "--yes", check=False)
    assert deleted.returncode != 0 and "version 1 of model 'mnist'" in deleted.stderr, deleted

    described = json.loads(h.run("model", "describe", "mnist", "--json").stdout)
    assert described["description"] == "a cnn"
    assert [(v["version"], v["checkpoint_uuid"]) for v in described["versions"]] == [
        (1, by_steps[20])]
    listing = h.run("model", "list").stdout
    assert "mnist" in listing, listing
    dest = tmp_path / "down"
    h.run("model", "download", "mnist", "--version", "1", "-o", str(dest), "-q")
    assert (dest / "state").read_text() == "20"

    sdk = subprocess.run([sys.executable, "-c", SDK, by_steps[20], str(tmp_path / "sdk")],
                         env=h.env(), capture_output=True, text=True, timeout=120)
    assert sdk.returncode == 0, sdk.stderr
    got = json.loads(sdk.stdout)
    assert got["versions"] == [1, 2, 1] and got["descending"] == [2, 1], got
    assert (got["uuid"], got["steps"], got["models"]) == (by_steps[20], 20,
                                                         ["mnist", "sdk-model"])
    assert (Path(got["path"]) / "state").read_text() == "20"

    before = [h.run("model", "describe", name, "--json").stdout
              for name in ("mnist", "sdk-model")]
    h.stop()
    for f in h.state.glob("hpcdet.db*"):
        f.unlink()
    h.run("daemon", "start")
    after = [h.run("model", "describe", name, "--json").stdout
             for name in ("mnist", "sdk-model")]
    assert after == before

    h.run("experiment", "delete", str(exp), "--yes")
    assert sorted(p.name for p in storage.iterdir()) == [by_steps[20]]
    gone = h.run("model", "download", "mnist", check=False)
    assert gone.returncode != 0 and f"{storage}/{by_steps[20]}" in gone.stderr, gone
