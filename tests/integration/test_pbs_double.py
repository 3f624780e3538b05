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

from tests import packing_scenarios, scenarios, task_scenarios
from tests.runtimes import Runtime, require_runtimes
from tests.support import Hpcdet

DOUBLE = Path(__file__).parents[1] / "doubles" / "pbs"


@pytest.fixture
def pbs_hpcdet(tmp_path: Path) -> Iterator[Hpcdet]:
    yield from _pbs(tmp_path, {})


@pytest.fixture
def pbs_apptainer_hpcdet(container_root: Path) -> Iterator[Hpcdet]:
    """On the PBS double, trials in the real Apptainer's base image, as root (state outside
    /tmp, which each container has of its own)."""
    require_runtimes()
    yield from _pbs(container_root, {})


def _pbs(tmp_path: Path, extra_env: dict[str, str]) -> Iterator[Hpcdet]:
    home = tmp_path / "pbs-server"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({
        "hosts": [{"name": "pbs-a", "ncpus": 4}, {"name": "pbs-b", "ncpus": 4}],
        "kill_delay": 2,
        "acl_roots": ["root"],  # CI runs as root; a real server's acl_roots must list it
    }))
    h = Hpcdet(tmp_path / "user", "pbs", extra_env={
        "PATH": f"{DOUBLE / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PBS_DOUBLE_HOME": str(home), **extra_env,
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
    # Every trial's first run is a task of one array; a trial promoted after the array's tasks
    # have ended runs again in a job of its own.
    first = [r for r in d["runs"] if r["run_id"] == 1]
    assert len(first) == len({r["trial_id"] for r in d["runs"]})
    assert {r["job_id"].split("[")[0] for r in first} == {"0"}, d["runs"]
    assert all(r["job_id"].endswith("].pbsdouble") for r in first), [
        (r["trial_id"], r["run_id"], r["job_id"], r["state"]) for r in d["runs"]]


def test_stage4_over_two_hosts(pbs_hpcdet: Hpcdet, tmp_path: Path) -> None:
    """The tutorial's config as it is (8 slots, no pbs: section): pbsnodes says the hosts have
    4 CPUs each, so the trial takes both."""
    infos = scenarios.stage4_nodes(pbs_hpcdet, tmp_path)
    assert [i["container_rank"] for i in infos] == [0, 1]
    assert [len(i["slot_ids"]) for i in infos] == [4, 4]


def test_pause_and_activate_resume_from_checkpoint(pbs_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.pause_activate(pbs_hpcdet, tmp_path)


def test_trial_longer_than_walltime_completes_across_jobs(
    pbs_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    """PBS sends no signal before the walltime: the harness's deadline (30 s into a 40 s
    walltime) asks the trial to checkpoint, and the daemon resubmits from the checkpoint."""
    scenarios.longer_than_walltime(pbs_hpcdet, tmp_path, "pbs:\n  walltime: '00:00:40'\n", 80)


# ---- the job queue: qalter -p and qmove ---------------------------------------------------------

def _qstat(h: Hpcdet) -> dict[int, dict[str, object]]:
    """hpcdet's jobs on the double by experiment id: state, Priority, queue."""
    import subprocess

    out = subprocess.run(["qstat", "-f", "-F", "json", "-t"], env=h.env(), capture_output=True,
                         text=True, check=True).stdout
    jobs = json.loads(out).get("Jobs", {})
    return {int(a["Job_Name"].split("-")[1][1:]): {"state": a["job_state"],
                                                   "priority": a["Priority"],
                                                   "queue": a["queue"]}
            for a in jobs.values() if str(a["Job_Name"]).startswith("hpcdet-e")}


def test_a_walltime_kill_is_a_timeout_not_the_trial_s_failure(
        pbs_hpcdet: Hpcdet, tmp_path: Path) -> None:
    """The MoM's kill comes at its next poll after the walltime (check_poll 10 s, as a real
    MoM's min_check_poll), while qstat may still say R when the harness's exit lands."""
    scenarios.killed_at_walltime(pbs_hpcdet, tmp_path, "pbs:\n  walltime: '00:00:10'\n")


def test_one_qstat_per_tick(pbs_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.one_status_query_per_tick(pbs_hpcdet, tmp_path, 3, "qstat", "qsub",
                                        frozenset({"pbs-a", "pbs-b"}))


def test_a_trial_that_can_never_fit_is_refused_naming_the_nodes(
        pbs_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.never_fits(pbs_hpcdet, tmp_path, "pbs", "'(all nodes)'")


def test_job_update_sets_priority_and_moves_queues_with_refusals_undone(
    pbs_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    import subprocess

    h = pbs_hpcdet
    env = h.env()
    blocker = tmp_path / "blocker.sh"
    blocker.write_text("#!/bin/bash\n#PBS -l select=2:ncpus=4\n#PBS -l place=scatter\n"
                       "sleep 600\n")
    subprocess.run(["qsub", str(blocker)], env=env, check=True, capture_output=True,
                   cwd=tmp_path)  # its output goes to qsub's directory
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "x.py").write_text("print('ran')\n")

    def config(name: str) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"name: {name}\nentrypoint: python3 x.py\nmax_restarts: 0\n"
                        "searcher: {name: single, metric: x, max_length: 1}\n")
        return path

    a, b, c = (h.create(config(n), ctx) for n in "abc")
    h.wait_for("three queued jobs", lambda: len(_qstat(h)) == 3, timeout=60)
    assert {j["priority"] for j in _qstat(h).values()} == {0}  # the default costs nothing
    h.run("job", "update", str(b), "--priority", "45")  # 3 steps worse: Priority -30
    h.run("job", "update", str(c), "--ahead-of", str(a))
    jobs = _qstat(h)
    assert (jobs[a]["priority"], jobs[b]["priority"], jobs[c]["priority"]) == (-1, -30, 0)
    # qstat lists the queue in order: qorder put c ahead of a, and b (priority 45) last.
    assert list(jobs) == [c, a, b], jobs

    h.run("job", "update", str(a), "--resource-pool", "gpuq")
    # Alone in its queue, a need not sort behind c any more.
    assert (_qstat(h)[a]["queue"], _qstat(h)[a]["priority"]) == ("gpuq", 0)
    refused = h.run("job", "update", str(a), "--resource-pool", "closedq", check=False)
    assert refused.returncode == 1, refused
    assert "Unauthorized Request" in refused.stderr and "Traceback" not in refused.stderr
    assert "Nothing was changed" in refused.stderr, refused.stderr
    refused = h.run("job", "update-batch", f"{a}.priority=50", f"{a}.resource-pool=closedq",
                    check=False)
    assert refused.returncode == 1, refused
    jobs = _qstat(h)
    assert (jobs[a]["queue"], jobs[a]["priority"]) == ("gpuq", 0)
    rows = {r["job_id"]: r for r in json.loads(h.run("job", "list", "--json").stdout)}
    assert (rows[str(a)]["resource_pool"], rows[str(a)]["priority"]) == ("gpuq", 42)


def test_a_trial_in_an_image(pbs_apptainer_hpcdet: Hpcdet, container_root: Path) -> None:
    """The container sees PBS's variables and nothing else of the job's environment."""
    h = pbs_apptainer_hpcdet
    Runtime("apptainer").configure(h)
    h.extra_env["LEAKY_HOST_VAR"] = "the job's, not the container's"
    ctx = h.mkdir(container_root / "t" / "ctx")
    (ctx / "t.py").write_text(
        "import json, os\nimport determined as det\n"
        "print('ENV', json.dumps(sorted(os.environ)), flush=True)\n"
        "with det.core.init() as core:\n"
        "    core.train.report_training_metrics(steps_completed=1, metrics={'x': 1.0})\n")
    cfg = container_root / "t" / "image.yaml"
    cfg.write_text(json.dumps({
        "name": "pbs-image", "entrypoint": "python3 t.py", "max_restarts": 0,
        "environment": {"image": Runtime("apptainer").image},
        "searcher": {"name": "single", "metric": "x", "max_length": 1}}))
    out = h.run("experiment", "create", str(cfg), str(ctx), "-f", timeout=300).stdout
    assert h.describe(1)["experiment"]["state"] == "COMPLETED", out[-3000:]
    env = json.loads(next(line for line in out.splitlines() if "ENV [" in line).split("ENV ")[1])
    assert "PBS_JOBID" in env and "APPTAINER_CONTAINER" in env, env
    assert "LEAKY_HOST_VAR" not in env


def test_a_packed_search_decides_as_one_job_per_trial(pbs_hpcdet: Hpcdet, tmp_path: Path
                                                     ) -> None:
    (tmp_path / "plain").mkdir()
    plain = next(_pbs(tmp_path / "plain", {}))
    try:
        packing_scenarios.same_decisions_as_one_job_per_trial(pbs_hpcdet, plain, tmp_path)
    finally:
        plain.stop()
        _qdel_everything(tmp_path / "plain" / "pbs-server")


def test_a_qdeleted_allocations_trials_go_on_from_their_checkpoints(
        pbs_hpcdet: Hpcdet, tmp_path: Path) -> None:
    env_path = pbs_hpcdet.env()["PATH"]
    packing_scenarios.killed_allocation(pbs_hpcdet, tmp_path, [
        "env", f"PATH={env_path}", f"PBS_DOUBLE_HOME={tmp_path / 'pbs-server'}", "qdel"])


def test_a_command_runs_as_a_pbs_job(pbs_hpcdet: Hpcdet, tmp_path: Path) -> None:
    import socket

    task_scenarios.command_runs(pbs_hpcdet, tmp_path, {socket.gethostname()})
