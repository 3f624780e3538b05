"""A laptop's files over SSH (issue 41): a create's context uploaded by content hash and
resumed after a cut, a re-sent create made once, downloads fetched over SFTP and resumed,
and the SDK driving the cluster (`tests/remote_support.py`)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.remote_support import (
    CLI,
    Laptop,
    code_context,
    experiment,
    sent_bytes,
    tree,
)
from tests.support import Hpcdet


def test_create_uploads_only_what_changed_and_a_resent_create_is_made_once(
        laptop: tuple[Laptop, Hpcdet], tmp_path: Path) -> None:
    lap, h = laptop
    ctx = code_context(tmp_path / "laptop-files")
    cfg = ctx.parent / "const.yaml"
    first = lap.run("-c", "x", "e", "create", str(cfg), str(ctx), "--config", "name=first")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[-1] == "Created experiment 1"
    assert 0 < sent_bytes(first.stderr) < 1000  # the code, not the ignored data
    copied = tree(h.state / "runs" / "exp-1" / "context")
    assert sorted(copied) == ["pkg/model.py", "run.sh", "train.py"]
    assert copied["run.sh"] == ((ctx / "run.sh").read_bytes(), 0o700)  # private, still run
    assert h.run("e", "describe", "1", "--json").stdout.count('"first"') >= 1
    # Unchanged: nothing sent. One file changed: that file alone.
    again = lap.run("-c", "x", "e", "create", str(cfg), str(ctx))
    assert again.returncode == 0 and sent_bytes(again.stderr) == 0, again.stderr
    (ctx / "pkg" / "model.py").write_text("WIDTH = 8\n")
    changed = lap.run("-c", "x", "e", "create", str(cfg), str(ctx))
    assert changed.returncode == 0 and sent_bytes(changed.stderr) == len("WIDTH = 8\n")
    assert "of 1 of 4 files" in changed.stderr, changed.stderr
    # A config error names the laptop's file and sends nothing.
    (ctx.parent / "bad.yaml").write_text("entrypoint: [1\n")
    bad = lap.run("-c", "x", "e", "create", str(ctx.parent / "bad.yaml"), str(ctx))
    assert bad.returncode == 1 and str(ctx.parent / "bad.yaml") in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr and "Sent" not in bad.stderr
    # The same create sent twice (the laptop's connection dropped after the login node took
    # it): one experiment, both answered with it.
    from hpcdet.remote.upload import CreateArgs, make_manifest

    args = CreateArgs(("experiment", "create"), cfg, ctx, (), (), ())
    snap = tmp_path / "snap"
    shutil.copytree(ctx, snap, ignore=shutil.ignore_patterns("data", ".detignore"))
    manifest, _ = make_manifest(args, snap, "resent-1")
    answers = [subprocess.run([h.python, "-m", "hpcdet.cli.main", "relay", "create"],
                              env=h.env(), input=manifest.to_json().decode(),
                              capture_output=True, text=True, timeout=120, check=False)
               for _ in range(2)]
    assert all("Created experiment 4\n" in a.stdout for a in answers), answers[0].stderr
    assert "exp-5" not in os.listdir(h.state / "runs")


CUT_AT = 12_000_000


def test_an_upload_cut_midway_resumes_and_sends_each_byte_once(
        laptop: tuple[Laptop, Hpcdet], tmp_path: Path) -> None:
    lap, h = laptop
    ctx = code_context(tmp_path / "laptop-files")
    weights = os.urandom(40_000_000)
    (ctx / "weights.bin").write_bytes(weights)
    create = subprocess.Popen([*CLI, "-c", "x", "e", "create", str(ctx.parent / "const.yaml"),
                               str(ctx)], env=lap.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    blobs = h.state / "uploads" / "blobs"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        parts = [p.stat().st_size for p in blobs.glob("*.part")] if blobs.exists() else []
        if any(n > CUT_AT for n in parts):
            break
        time.sleep(0.005)
    lap.cut()
    out, err = create.communicate(timeout=180)
    assert create.returncode == 0, err
    assert "Warning: the connection to x broke" in err and "going on where it stopped" in err
    assert CUT_AT < max(parts) < len(weights)  # it was cut midway
    # Sent from the start again, it would be at least CUT_AT more; what was in flight when the
    # connection broke (paramiko's pipelined writes: ~100 of 32 KiB) is sent again.
    assert len(weights) <= sent_bytes(err) < len(weights) + CUT_AT, err
    assert out.splitlines()[-1] == "Created experiment 1"
    assert (h.state / "runs" / "exp-1" / "context" / "weights.bin").read_bytes() == weights
    assert sorted(os.listdir(h.state / "runs")) == ["bell", "exp-1"]


CHECKPOINT = '''
import os
import determined as det
with det.core.init() as core_context:
    core_context.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.5})
    with core_context.checkpoint.store_path({"steps_completed": 1}) as (path, _):
        (path / "weights").write_bytes(os.urandom(30_000_000))
        (path / "sub").mkdir()
        (path / "sub" / "step").write_text("1")
'''


def test_downloads_come_to_the_laptop_and_resume_after_a_cut(
        laptop: tuple[Laptop, Hpcdet], tmp_path: Path) -> None:
    lap, h = laptop
    experiment(h, tmp_path, CHECKPOINT)
    h.run("e", "wait", "1")
    uuid = next(csv.DictReader(h.run("e", "lc", "1", "--csv").stdout.splitlines()))["UUID"]
    stored = h.state / "checkpoints" / uuid
    here = tmp_path / "on-laptop"
    # The login node's own output and exit code, the files here.
    far = lap.run("-c", "x", "c", "download", uuid, "-o", str(here / "a"))
    near = h.run("c", "download", uuid, "-o", str(tmp_path / "near"))
    assert far.returncode == 0, far.stderr
    assert far.stdout == near.stdout.replace(str(tmp_path / "near"), str(here / "a"))
    assert tree(here / "a") == tree(stored) and (here / "a").stat().st_mode & 0o777 == 0o700
    best = lap.run("-c", "x", "t", "download", "1", "--latest", "-o", str(here / "b"), "-q")
    assert best.stdout == f"{here / 'b'}\n", best.stderr
    assert (here / "b" / "sub" / "step").read_text() == "1"
    missing = lap.run("-c", "x", "c", "download", "no-such-uuid")
    assert (missing.returncode, missing.stderr) == (1, h.run(
        "c", "download", "no-such-uuid", check=False).stderr)
    # A full directory is refused here, as there.
    full = lap.run("-c", "x", "c", "download", uuid, "-o", str(here / "a"))
    assert full.returncode == 1 and "already holds files" in full.stderr, full.stderr
    # Cut midway: resumed from the bytes already here.
    cut = subprocess.Popen([*CLI, "-c", "x", "c", "download", uuid, "-o", str(here / "c")],
                           env=lap.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    partial = here / ".c.hpcdet-download" / "weights"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
            partial.exists() and partial.stat().st_size > 3_000_000):
        time.sleep(0.005)
    seen = partial.stat().st_size
    lap.cut()
    out, err = cut.communicate(timeout=120)
    assert cut.returncode == 0, err
    assert 3_000_000 < seen < 30_000_000 and "going on where it stopped" in err
    assert tree(here / "c") == tree(stored) and not partial.parent.exists()


SDK_SCRIPT = '''
import sys
from pathlib import Path
from hpcdet import client as hpcdet_client

hpcdet_client.as_determined()
from determined.experimental import client  # a script written for Determined's SDK

client.login(cluster="x")
exp = client.create_experiment(sys.argv[1], sys.argv[2])
print("created", exp.id, exp.name)
assert exp.wait(interval=0.2) == client.ExperimentState.COMPLETED, exp.state
trial = exp.list_trials()[0]
print("trial", trial.id, trial.state, trial.hparams)
print("metrics", [m.metrics for m in trial.iter_metrics("validation")])
best = exp.top_checkpoint()
print("step", Path(best.download(sys.argv[3]), "sub", "step").read_text())
exp.add_label("far")
exp.archive()
exp.reload()
print("archived", exp.archived, exp.labels)
print("listed", [e.id for e in client.list_experiments(labels=["far"])])
try:
    client.get_experiment(99)
except Exception as e:
    print("missing", type(e).__name__, e)
'''


def test_the_sdk_drives_the_cluster_from_the_laptop(laptop: tuple[Laptop, Hpcdet],
                                                    tmp_path: Path) -> None:
    lap, h = laptop
    ctx = tmp_path / "model"
    ctx.mkdir()
    (ctx / "t.py").write_text(CHECKPOINT)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("name: sdk\nentrypoint: python3 t.py\n"
                   "searcher: {name: single, metric: loss, max_length: 1}\n")
    script = tmp_path / "script.py"
    script.write_text(SDK_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(cfg), str(ctx),
                           str(tmp_path / "dl")], env=lap.env, capture_output=True, text=True,
                          timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "created 1 sdk" and lines[1].startswith("trial 1 COMPLETED")
    assert lines[2] == "metrics [{'loss': 0.5}]" and lines[3] == "step 1"
    assert lines[4] == "archived True ['far']" and lines[5] == "listed [1]"
    assert lines[6].startswith("missing NotFoundError ")
    assert (tmp_path / "dl" / "weights").stat().st_size == 30_000_000
    # It was the login node's daemon that did it.
    described = json.loads(h.run("e", "describe", "1", "--json").stdout)
    assert described["experiment"]["archived"] is True, described
