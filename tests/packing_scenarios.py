"""Packed searches (``resources.packing``) on any batch backend: the same decisions and
metrics as one job per trial, in few allocations, and an allocation killed mid-search."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.support import Hpcdet, copy_examples

ASHA = """name: {name}
entrypoint: python3 3_hpsearch_v038.py
hyperparameters:
  increment_by: {{type: int, minval: 1, maxval: 8}}
searcher: {{name: adaptive_asha, metric: x, max_trials: {trials}, time_metric: batches,
           max_time: 100, max_concurrent_trials: 1}}
reproducibility: {{experiment_seed: 11}}
max_restarts: 0
resources:
  slots_per_trial: 1
{packing}"""
PACKING = "  packing: {slots: 2, walltime: '20:00', allocations: 2}\n"
# The equivalence's size: 8 in the suite; issue 45's acceptance size (60) is run by hand with
# HPCDET_PACKING_TRIALS=60.
TRIALS = int(os.environ.get("HPCDET_PACKING_TRIALS", "8"))


def pilots(h: Hpcdet, exp: int) -> list[Path]:
    return sorted(h.state.glob(f"runs/exp-{exp}/array/pilot-*"))


def _decisions(h: Hpcdet, exp: int) -> dict[int, Any]:
    """Per search request: its hyperparameters, best validation and end (what the searcher
    decided), and its metrics by step."""
    return {t["request_id"]: ((t["hparams"], t["best_validation"], t["state"], t["end_reason"]),
                              {(m["group"], m["steps_completed"]): m["metrics"]
                               for m in h.metrics(t["id"])})
            for t in h.describe(exp)["trials"]}


def same_decisions_as_one_job_per_trial(packed: Hpcdet, plain: Hpcdet, tmp: Path) -> None:
    """A seeded adaptive ASHA search (one trial at a time, so that its decisions are a
    function of the seed alone) packed into pilots decides and reports exactly what it does
    with one job per trial; its runs name their pilot."""
    ctx = copy_examples(tmp / "ctx")
    script = ctx / "3_hpsearch_v038.py"
    script.write_text(script.read_text().replace("time.sleep(0.1)", "time.sleep(0.01)"))
    for name, packing in (("packed", PACKING), ("plain", "")):
        (tmp / f"{name}.yaml").write_text(ASHA.format(name=name, packing=packing,
                                                      trials=TRIALS))
    exps = {"packed": packed.create(tmp / "packed.yaml", ctx),
            "plain": plain.create(tmp / "plain.yaml", ctx)}
    for h, name in ((packed, "packed"), (plain, "plain")):
        d = h.wait_state(exps[name], {"COMPLETED", "ERROR"}, timeout=600 + TRIALS * 20)
        assert d["experiment"]["state"] == "COMPLETED", d
    ran_in = {r["job_id"] for r in packed.describe(exps["packed"])["runs"]}
    assert all("+" in job for job in ran_in), ran_in  # every run in a pilot
    assert 1 <= len(pilots(packed, exps["packed"])) <= 2
    assert len({job.split("+")[0] for job in ran_in}) <= 2
    mine, theirs = _decisions(packed, exps["packed"]), _decisions(plain, exps["plain"])
    assert mine.keys() == theirs.keys() and len(mine) == TRIALS
    for request, (decided, metrics) in mine.items():
        assert decided == theirs[request][0], request
        # A stopped trial runs on until it reads the stop, for as long as that takes: the
        # steps both ran report the same.
        both = metrics.keys() & theirs[request][1].keys()
        assert both and all(metrics[k] == theirs[request][1][k] for k in both), request


def _checkpointing(h: Hpcdet, where: Path, step_seconds: float, config: str) -> int:
    """An experiment of the tutorial's stage 2 (a checkpoint every 10 of its 100 steps),
    ``step_seconds`` a step, with ``config`` after its entrypoint."""
    ctx = copy_examples(where)
    script = ctx / "2_checkpoints.py"
    script.write_text(script.read_text().replace("time.sleep(0.1)",
                                                 f"time.sleep({step_seconds})"))
    (where / "exp.yaml").write_text("name: packed\nentrypoint: python3 2_checkpoints.py\n"
                                    + config)
    return h.create(where / "exp.yaml", ctx)


def killed_allocation(h: Hpcdet, tmp: Path, cancel: list[str]) -> None:
    """Four 30-s trials two to a pilot in two pilots; the first pilot is canceled once its
    trials have checkpointed: they go on from their checkpoints in another pilot, and every
    trial ends with x = 100 and each step's metrics reported."""
    exp = _checkpointing(h, tmp / "kill", 0.3, (
        "hyperparameters: {tag: {type: int, minval: 1, maxval: 9}}\n"
        "searcher: {name: random, metric: x, max_trials: 4, max_length: 100}\n"
        "resources:\n  slots_per_trial: 1\n"
        "  packing: {slots: 2, walltime: '20:00', allocations: 2}\n"))

    def first_pilots_trials_checkpointed() -> bool:
        d = h.describe(exp)
        first = [p for p in pilots(h, exp) if p.name == "pilot-0"]
        if not first or not (first[0] / "job_id").exists():
            return False
        job = (first[0] / "job_id").read_text().strip()
        mine = {r["trial_id"] for r in d["runs"] if r["job_id"].startswith(job + "+")}
        return len(mine) == 2 and all(
            t["latest_checkpoint"] for t in d["trials"] if t["id"] in mine)

    h.wait_for("the first pilot's trials to checkpoint", first_pilots_trials_checkpointed,
               timeout=300)
    job = (pilots(h, exp)[0] / "job_id").read_text().strip()
    subprocess.run([*cancel, job], check=True, capture_output=True)
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=600)
    assert d["experiment"]["state"] == "COMPLETED", json.dumps(d)[-3000:]
    killed = {r["trial_id"] for r in d["runs"] if r["job_id"].startswith(job + "+")}
    assert len(killed) == 2
    for t in d["trials"]:
        rows = h.metrics(t["id"])
        steps = sorted({r["steps_completed"] for r in rows if r["group"] == "training"})
        assert steps == list(range(10, 101, 10)), (t["id"], steps)
        assert [r["metrics"] for r in rows if r["group"] == "validation"] == [{"x": 100}]
        runs = [r for r in d["runs"] if r["trial_id"] == t["id"]]
        assert len(runs) == (2 if t["id"] in killed else 1), runs
        if t["id"] in killed:  # went on from its checkpoint, not from the start
            again = [r for r in rows if r["run_id"] == 2 and r["group"] == "training"]
            assert again and again[0]["steps_completed"] > 10, again
    assert len(pilots(h, exp)) <= 3


def across_allocations(h: Hpcdet, tmp: Path) -> None:
    """A trial longer than its allocation's walltime checkpoints as the pilot nears it, and
    goes on from that checkpoint in the next pilot."""
    exp = _checkpointing(h, tmp / "long", 0.5, (
        "searcher: {name: single, metric: x, max_length: 100}\n"
        "resources:\n  slots_per_trial: 1\n"
        "  packing: {slots: 1, walltime: '00:00:45', allocations: 1}\n"))
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=300)
    assert d["experiment"]["state"] == "COMPLETED", json.dumps(d)[-3000:]
    runs = d["runs"]
    assert len(runs) == 2 and len({r["job_id"].split("+")[0] for r in runs}) == 2, runs
    rows = h.metrics(d["trials"][0]["id"])
    steps = [r["steps_completed"] for r in rows if r["group"] == "training"]
    assert steps == list(range(10, 101, 10)), steps  # each once: resumed, not restarted
    second = [r for r in rows if r["run_id"] == 2 and r["group"] == "training"]
    assert second and second[0]["steps_completed"] > 10, second
    assert [r["metrics"] for r in rows if r["group"] == "validation"] == [{"x": 100}]
    assert d["trials"][0]["restarts"] == 0  # a walltime is no failure
