"""hpcdet on PBS, end to end, against the PBS double (tests/doubles/pbs: real executables that
follow OpenPBS's man pages; no PBS server can be installed here). The tutorial's stages, a
search as one -J array, two fake hosts, pause and activate, and a walltime crossed by
checkpoint and resubmission."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import scenarios
from tests.support import FIXTURES, Hpcdet, copy_examples

DOUBLE = Path(__file__).parents[1] / "doubles" / "pbs"


@pytest.fixture
def pbs_hpcdet(tmp_path: Path) -> Iterator[Hpcdet]:
    home = tmp_path / "pbs-server"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({
        "hosts": [{"name": "pbs-a", "ncpus": 4}, {"name": "pbs-b", "ncpus": 4}],
        "kill_delay": 2,
    }))
    h = Hpcdet(tmp_path / "user", "pbs", extra_env={
        "PATH": f"{DOUBLE / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PBS_DOUBLE_HOME": str(home),
    })
    yield h
    h.stop()
    _qdel_everything(home)


def _qdel_everything(home: Path) -> None:
    import subprocess

    env = {**os.environ, "PBS_DOUBLE_HOME": str(home)}
    out = subprocess.run([str(DOUBLE / "bin" / "qstat")], env=env, capture_output=True,
                         text=True).stdout
    ids = [line.split()[0] for line in out.splitlines()[2:] if line.strip()]
    if ids:
        subprocess.run([str(DOUBLE / "bin" / "qdel"), *ids], env=env, capture_output=True)


def test_stage0(pbs_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.stage0(pbs_hpcdet, tmp_path)


def test_stage1_metrics(pbs_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.stage1(pbs_hpcdet, tmp_path)


def test_stage2_checkpoints(pbs_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.stage2(pbs_hpcdet, tmp_path)


def test_stage3_search_is_one_array(pbs_hpcdet: Hpcdet, tmp_path: Path) -> None:
    d = scenarios.asha_v037(pbs_hpcdet, tmp_path)
    arrays = {r["job_id"].split("[")[0] for r in d["runs"] if "[" in r["job_id"]}
    assert len(arrays) == 1, d["runs"]
    assert all(r["job_id"].endswith("].pbsdouble") for r in d["runs"]), d["runs"]


def test_stage4_over_two_hosts(pbs_hpcdet: Hpcdet, tmp_path: Path) -> None:
    h = pbs_hpcdet
    ctx = copy_examples(tmp_path / "ctx")
    out = h.run("experiment", "create", str(ctx / "4_distributed.yaml"), str(ctx), "-f",
                "--config", "pbs.slots_per_node=4", timeout=300).stdout
    d = h.describe(1)
    assert d["experiment"]["state"] == "COMPLETED", (d, out[-3000:])
    for rank in range(8):
        assert f"[rank={rank}]" in out, rank
    run_dir = h.state / "runs" / "exp-1" / "trials" / str(d["trials"][0]["id"]) / "run-1"
    infos = [json.loads((run_dir / "nodes" / f"{n}.json").read_text()) for n in (0, 1)]
    assert [i["container_rank"] for i in infos] == [0, 1]
    assert [len(i["slot_ids"]) for i in infos] == [4, 4]
    rows = h.metrics(d["trials"][0]["id"])
    assert [r["metrics"] for r in rows if r["group"] == "validation"] == [{"x": 800}]


def test_pause_and_activate_resume_from_checkpoint(pbs_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.pause_activate(pbs_hpcdet, tmp_path)


def test_trial_longer_than_walltime_completes_across_jobs(
    pbs_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    """PBS sends no signal before the walltime: the harness's deadline asks the trial to
    checkpoint, the job ends, and the daemon resubmits from the checkpoint."""
    h = pbs_hpcdet
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "long.py").write_text((FIXTURES / "long_training.py").read_text())
    cfg = tmp_path / "long.yaml"
    cfg.write_text(
        "name: long\nentrypoint: python3 long.py\n"
        "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n"
        "environment:\n  environment_variables: [STEPS=80]\n"
        "pbs:\n  walltime: '00:00:40'\n"
    )
    exp = h.create(cfg, ctx)
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=400)
    assert d["experiment"]["state"] == "COMPLETED", d
    assert len(d["runs"]) >= 2, d["runs"]
    assert d["trials"][0]["restarts"] == 0
    rows = h.metrics(d["trials"][0]["id"])
    training = [(r["steps_completed"], r["metrics"]["x"]) for r in rows
                if r["group"] == "training"]
    assert training == [(s, s) for s in range(10, 81, 10)]
