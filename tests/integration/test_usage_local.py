"""Slot-hours, idle GPUs and the estimate before a create (issue 46), end to end on the local
backend: a trial whose one GPU idles (the nvidia-smi double of tests/doubles/nvidia-smi prints
the CSV NVIDIA documents, 0% utilization: no GPU here), its GPU-hours from the run tree in
`describe`, `e list --json` and the SDK, and a second create of the same experiment, estimated
from the first one's speed, refused without --yes above ask_above_slot_hours."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx

from tests.support import Hpcdet, ui_server

DOUBLE = Path(__file__).resolve().parents[1] / "doubles" / "nvidia-smi" / "bin"
SCRIPT = """
import time
import determined as det

with det.core.init() as core_context:
    time.sleep(1.2)
    core_context.train.report_training_metrics(steps_completed=2, metrics={"loss": 1.0})
"""
CONFIG = """name: usage-probe
entrypoint: python3 train.py
searcher: {name: single, metric: loss, max_length: {batches: 2}}
max_restarts: 0
environment:
  environment_variables: [HPCDET_GPU_IDLE_SECONDS=0.5, HPCDET_GPU_SAMPLE_SECONDS=0.1]
"""


def test_gpu_hours_idle_gpus_and_the_estimate(tmp_path: Path) -> None:
    h = Hpcdet(tmp_path / "user", "local",
               extra_env={"PATH": f"{DOUBLE}{os.pathsep}{os.environ['PATH']}"})
    try:
        _check(h, tmp_path)
    finally:
        h.stop()


def _check(h: Hpcdet, tmp_path: Path) -> None:
    with (h.root / "cluster.yaml").open("a") as f:
        f.write("ask_above_slot_hours: 0\n")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text(SCRIPT)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(CONFIG)
    out = h.run("experiment", "create", str(cfg), str(ctx)).stdout
    # Nothing measured yet: the plan alone, and no question whatever the threshold.
    assert "at most 1 trial of 1 GPU each, 2 batches in all" in out, out
    assert "No completed trial of an experiment named 'usage-probe'" in out, out
    d = h.wait_state(1, {"COMPLETED", "ERROR"})
    trial = d["trials"][0]["id"]
    assert d["experiment"]["state"] == "COMPLETED", h.run("trial", "logs", str(trial)).stdout

    [run] = d["runs"]
    assert run["started"] is not None and run["usage_by"] == ""  # no accounting on local
    used = d["usage"]
    assert (used["unit"], used["sources"], used["running"]) == ("GPU-hours", ["run tree"], 0)
    seconds = used["hours"] * 3600
    assert 1.2 < seconds < run["ended"] - run["submitted"] + 1, used
    assert d["usage"]["trials"][str(trial)]["hours"] == used["hours"]
    [idle] = d["idle_gpus"]
    assert (idle["trial_id"], idle["index"], idle["threshold"]) == (trial, 0, 0.5)
    assert idle["until"] == run["ended"]
    text = h.run("experiment", "describe", "1").stdout
    assert "GPU-hours (run tree)" in text and "GPU 0 on" in text and "was idle" in text, text
    logs = h.run("trial", "logs", str(trial)).stdout
    assert "GPU 0 (GPU-6f1f8f5a-58d6-4b7c-9f2f-3d0c8e1a0b00) has been idle" in logs, logs

    [row] = json.loads(h.run("experiment", "list", "--json").stdout)
    assert row["usage"]["hours"] == used["hours"]
    sdk = subprocess.run(
        [h.python, "-c", "import json; from hpcdet import client; "
         "print(json.dumps([client.get_experiment(1).usage, client.get_trial(1).usage]))"],
        env=h.env(), capture_output=True, text=True, timeout=60, check=True)
    assert [u["hours"] for u in json.loads(sdk.stdout)] == [used["hours"]] * 2
    with ui_server(h) as (base, secret):
        auth = {"Authorization": f"Bearer {secret}"}
        page = httpx.get(f"{base}/api/experiments/1", headers=auth).json()
        shown = httpx.get(f"{base}/api/trials/{trial}", headers=auth).json()
    assert page["usage"] == shown["usage"]  # one trial: the experiment's is the trial's
    assert page["usage"]["hours"] == used["hours"] and shown["idle_gpus"] == [idle]

    # The same search again: its hours from the first one's speed, above the threshold of 0.
    create = [h.python, "-m", "hpcdet.cli.main", "experiment", "create", str(cfg), str(ctx)]
    refused = subprocess.run(create, env=h.env(), capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
    assert refused.returncode != 0, refused.stdout
    assert "measured on 1 completed trial of 1 earlier experiment named 'usage-probe'" in \
        refused.stdout, refused.stdout
    assert "ask_above_slot_hours (0)" in refused.stderr and "--yes" in refused.stderr, \
        refused.stderr
    assert len(json.loads(h.run("experiment", "list", "--json").stdout)) == 1  # not created
    created = subprocess.run([*create, "--yes", "--paused"], env=h.env(), capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert "Created experiment 2" in created.stdout, created.stdout + created.stderr
    h.run("experiment", "kill", "2")


def test_on_pbs_the_figure_is_qstats(tmp_path: Path) -> None:
    # The PBS double prints resources_used.walltime and Resource_List as OpenPBS 23.06's
    # `qstat -f -F json -x` does (/work/shared/reference/openpbs-23.06/mpi2-x.json).
    from tests.integration.test_pbs_double import _pbs

    fixture = _pbs(tmp_path, {})
    h = next(fixture)
    try:
        ctx = tmp_path / "ctx"
        ctx.mkdir()
        (ctx / "train.py").write_text(SCRIPT.replace("time.sleep(1.2)", "time.sleep(1)"))
        cfg = tmp_path / "cfg.yaml"
        cfg.write_text("name: on-pbs\nentrypoint: python3 train.py\n"
                       "searcher: {name: single, metric: loss, max_length: 1}\n"
                       "resources: {slots_per_trial: 0}\nmax_restarts: 0\n")
        exp = h.create(cfg, ctx)
        d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=120)
        assert d["experiment"]["state"] == "COMPLETED", h.run("t", "logs", "1").stdout
        [run] = d["runs"]
        assert run["usage_by"] == "qstat" and run["used_seconds"] >= 1, run
        assert (d["usage"]["unit"], d["usage"]["sources"]) == ("slot-hours", ["qstat"])
        assert d["usage"]["hours"] == round(run["used_seconds"] / 3600, 4)
    finally:
        next(fixture, None)
