"""`hpcdet tensorboard` (issue 15): TensorBoard on an experiment's TensorBoard files, written
by a real trial on the local backend through core_context.train.get_tensorboard_path() and
torch's SummaryWriter, served behind the UI's token, and stopping by itself when idle."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.remote_support import CLI, Laptop, interruptible
from tests.support import Hpcdet

pytest.importorskip("tensorboard")
pytest.importorskip("torch")

TRAIN = """\
import determined as det
from torch.utils.tensorboard import SummaryWriter

with det.core.init() as core_context:
    writer = SummaryWriter(str(core_context.train.get_tensorboard_path()))
    for step in range(1, 6):
        writer.add_scalar("loss", 1.0 / step, step)
    writer.close()
    core_context.train.report_training_metrics(steps_completed=5, metrics={"loss": 0.2})
"""


def test_tensorboard_behind_the_token_stops_when_idle(local_hpcdet: Hpcdet, tmp_path: Path
                                                      ) -> None:
    h = local_hpcdet
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text(TRAIN)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("name: tb\nentrypoint: python3 train.py\n"
                   "searcher: {name: single, metric: loss, max_length: 5}\n")
    first = h.create(cfg, ctx)
    (ctx / "train.py").write_text("import determined as det\n"
                                  "with det.core.init(): pass\n")
    bare = h.create(cfg, ctx)
    h.wait_state(first, {"COMPLETED"})
    h.wait_state(bare, {"COMPLETED"})

    missing = h.run("tensorboard", str(bare), check=False)
    assert missing.returncode == 1 and f"experiment {bare} has no TensorBoard files" in (
        missing.stderr), missing.stderr
    unknown = h.run("tensorboard", "99", check=False)
    assert unknown.returncode == 1 and "99" in unknown.stderr and "Traceback" not in (
        unknown.stderr)

    proc = subprocess.Popen(
        [h.python, "-m", "hpcdet.cli.main", "tensorboard", str(first), "--port", "0",
         "--idle-timeout", "12"], env=h.env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        said = ""
        while "then open:" not in said and proc.poll() is None:
            said += proc.stdout.readline()
        port, secret = re.search(r"127\.0\.0\.1:(\d+)", said), re.search(r"token=(\S+)", said)
        assert port and secret, said
        base = f"http://127.0.0.1:{port.group(1)}"
        for route in ("/", "/data/runs", "/data/plugin/scalars/tags"):
            assert httpx.get(base + route).status_code == 401, route
        auth = {"Authorization": f"Bearer {secret.group(1)}"}
        run = f"exp-{first}/trial/1"
        deadline = time.monotonic() + 60
        while run not in httpx.get(base + "/data/runs", headers=auth).json():
            assert time.monotonic() < deadline, "TensorBoard never found the trial's run"
            time.sleep(1)
        scalars = httpx.get(base + "/data/plugin/scalars/scalars", headers=auth,
                            params={"run": run, "tag": "loss"}).json()
        assert [(step, round(value, 6)) for _, step, value in scalars] == [
            (s, round(1.0 / s, 6)) for s in range(1, 6)]
        page = httpx.get(base + "/", headers=auth)
        assert page.status_code == 200 and "<tf-tensorboard" in page.text.lower() or (
            "tensorboard" in page.text.lower())
        # No request for 12 s: it stops by itself and says so.
        rest, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0 and "stopping" in rest, rest
    finally:
        if proc.poll() is None:
            proc.kill()


def test_tensorboard_from_a_laptop(laptop: tuple[Laptop, Hpcdet], tmp_path: Path) -> None:
    """`hpcdet -c x tensorboard ID`: the login node serves its private socket only, the
    laptop a loopback port, behind the same token."""
    lap, h = laptop
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text(TRAIN)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("name: tb\nentrypoint: python3 train.py\n"
                   "searcher: {name: single, metric: loss, max_length: 5}\n")
    h.wait_state(h.create(cfg, ctx), {"COMPLETED"})
    proc = subprocess.Popen([*CLI, "-c", "x", "tensorboard", "1"], env=lap.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=(\S+)", line)
        assert found, line
        base, auth = found.group(1), {"Authorization": f"Bearer {found.group(2)}"}
        assert httpx.get(base + "/data/runs", timeout=30).status_code == 401
        deadline = time.monotonic() + 60
        while "exp-1/trial/1" not in httpx.get(base + "/data/runs", headers=auth,
                                               timeout=30).json():
            assert time.monotonic() < deadline, "TensorBoard never found the trial's run"
            time.sleep(1)
        assert (h.state / "tensorboard.sock").exists()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
