"""`hpcdet job list` / `job update` on the two-node Slurm, as unprivileged users (issue 5).

Every job here needs a share of the cluster that makes the jobs start one at a time, so the
order Slurm starts them in is observable from their start times. The test cluster weighs the
partition (PriorityWeightPartition=1000) so that nice values change job priorities.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support import FIXTURES, Hpcdet

# Start order and Slurm priorities are only what they seem on a cluster nobody else uses.
pytestmark = pytest.mark.exclusive

SINGLE = "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n"
WHOLE_CLUSTER = "resources: {slots_per_trial: 8}\nslurm: {slots_per_node: 4}\n"


def _marking_context(tmp: Path) -> tuple[Path, Path]:
    """A context whose script notes its start time and partition, then works for 10 s."""
    ctx = tmp / "ctx"
    ctx.mkdir()
    starts = tmp / "starts"
    starts.mkdir()
    starts.chmod(0o777)
    (ctx / "mark.py").write_text(
        "import os, pwd, time\n"
        "name = pwd.getpwuid(os.getuid()).pw_name + '-' + os.environ['DET_EXPERIMENT_ID']\n"
        f"with open(os.path.join({str(starts)!r}, name), 'a') as f:\n"
        "    f.write(f\"{time.time()} {os.environ['SLURM_JOB_PARTITION']}\\n\")\n"
        "time.sleep(10)\n"
    )
    return ctx, starts


def _config(tmp: Path, name: str, body: str) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(f"name: {name}\n{SINGLE}{body}")
    return path


def _slurm_jobs() -> dict[tuple[str, int], dict[str, str]]:
    """All users' hpcdet jobs as root sees them, by (user, experiment id)."""
    out = subprocess.run(["squeue", "-h", "-o", "%u|%F|%T|%Q|%y|%P|%j"], check=True,
                         capture_output=True, text=True).stdout
    jobs = {}
    for line in out.splitlines():
        user, job_id, state, priority, nice, partition, name = line.split("|", 6)
        if name.startswith("hpcdet-e"):
            exp = int(name.split("-")[1][1:])
            jobs[(user, exp)] = {"id": job_id, "state": state, "priority": priority,
                                 "nice": nice, "partition": partition}
    return jobs


def _queued(h: Hpcdet) -> list[int]:
    rows = json.loads(h.run("job", "list", "--json").stdout)
    return [int(r["job_id"]) for r in rows if r["state"] == "QUEUED"]


def _running(h: Hpcdet, exp: int) -> bool:
    runs = h.describe(exp)["runs"]
    return bool(runs) and runs[-1]["state"] == "RUNNING"


def test_priorities_and_ahead_of_order_the_queue_without_penalising_the_user(
    users: dict[str, Hpcdet], open_tmp: Path
) -> None:
    u1, u2 = users["hpcdet-u1"], users["hpcdet-u2"]
    tmp = open_tmp / "work"
    tmp.mkdir()
    ctx, starts = _marking_context(tmp)
    blocker = u2.create(_config(tmp, "blocker", f"entrypoint: sleep 25\n{WHOLE_CLUSTER}"),
                        ctx)
    u2.wait_for("the blocker to run", lambda: _running(u2, blocker), timeout=60)
    work = f"entrypoint: python3 mark.py\n{WHOLE_CLUSTER}"
    a, b, c = (u1.create(_config(tmp, n, work), ctx) for n in "abc")
    d = u2.create(_config(tmp, "d", work), ctx)
    keys = {"a": ("hpcdet-u1", a), "b": ("hpcdet-u1", b), "c": ("hpcdet-u1", c),
            "d": ("hpcdet-u2", d)}
    u1.wait_for("all four pending", lambda: all(
        _slurm_jobs().get(k, {}).get("state") == "PENDING" for k in keys.values()), timeout=60)

    def slurm(n: str) -> dict[str, str]:
        return _slurm_jobs()[keys[n]]

    # The default priority costs nothing against another user's jobs.
    assert {(slurm(n)["priority"], slurm(n)["nice"]) for n in "abcd"} == {("1000", "0")}
    u1.run("job", "update", str(b), "--priority", "45")  # worse than the default: nice 300
    assert (slurm("b")["priority"], slurm("b")["nice"]) == ("700", "300")
    assert {slurm(n)["priority"] for n in "acd"} == {"1000"}  # the others are untouched
    u1.run("job", "update", str(c), "--ahead-of", str(a))
    assert _queued(u1) == [c, a, b]
    # a sorts just behind c (nice 1) only while c waits; d, another user's, is untouched.
    assert (slurm("a")["nice"], slurm("c")["nice"], slurm("d")["nice"]) == ("1", "0", "0")
    for h, exp in ((u1, a), (u1, b), (u1, c), (u2, d)):
        h.wait_state(exp, {"COMPLETED"}, timeout=240)
    started = sorted((float((starts / f"{k[0]}-{k[1]}").read_text().split()[0]), n)
                     for n, k in keys.items())
    # c first; once c runs, a is back at nice 0 and, submitted before d, starts before it.
    assert [n for _, n in started] == ["c", "a", "d", "b"], started


def test_resource_pool_moves_pending_and_running_experiments(
    users: dict[str, Hpcdet], open_tmp: Path
) -> None:
    u1 = users["hpcdet-u1"]
    tmp = open_tmp / "work"
    tmp.mkdir()
    ctx, starts = _marking_context(tmp)
    (ctx / "long.py").write_text((FIXTURES / "long_training.py").read_text())
    # Leaves one CPU per node: room for the 1-slot trial, none for the whole-cluster one.
    blocker = u1.create(_config(tmp, "blocker", "entrypoint: sleep 300\n"
                                "resources: {slots_per_trial: 6}\nslurm: {slots_per_node: 3}\n"),
                        ctx)
    u1.wait_for("the blocker to run", lambda: _running(u1, blocker), timeout=60)
    parts = u1.mkdir(tmp / "parts")
    running = u1.create(_config(
        tmp, "running",
        f"entrypoint: echo $SLURM_JOB_PARTITION >> {parts}/log && python3 long.py\n"
        "environment: {environment_variables: [STEPS=60]}\n"), ctx)
    pending = u1.create(_config(tmp, "pending",
                                f"entrypoint: python3 mark.py\n{WHOLE_CLUSTER}"), ctx)
    key = ("hpcdet-u1", pending)
    u1.wait_for("the big one pending", lambda: _slurm_jobs().get(key, {}).get(
        "state") == "PENDING", timeout=60)

    u1.run("job", "update", str(pending), "--resource-pool", "batch")
    assert _slurm_jobs()[key]["partition"] == "batch"
    refused = u1.run("job", "update", str(pending), "--resource-pool", "restricted",
                     check=False)
    assert refused.returncode == 1
    assert "not permitted to use this partition" in refused.stderr, refused.stderr
    assert "Nothing was changed" in refused.stderr and "Traceback" not in refused.stderr
    assert _slurm_jobs()[key]["partition"] == "batch"
    # In a batch, the refused move keeps the other update from being applied too.
    refused = u1.run("job", "update-batch", f"{pending}.priority=50",
                     f"{pending}.resource-pool=restricted", check=False)
    assert refused.returncode == 1 and "not permitted" in refused.stderr, refused.stderr
    assert {k: _slurm_jobs()[key][k] for k in ("nice", "partition")} == {
        "nice": "0", "partition": "batch"}
    rows = {r["job_id"]: r for r in json.loads(u1.run("job", "list", "--json").stdout)}
    assert (rows[str(pending)]["resource_pool"], rows[str(pending)]["priority"]) == ("batch", 42)
    in_pool = {pool: {r["job_id"] for r in json.loads(u1.run(
        "job", "list", "--resource-pool", pool, "--json").stdout)} for pool in ("batch", "debug")}
    assert str(pending) in in_pool["batch"] and str(pending) not in in_pool["debug"]
    assert str(blocker) in in_pool["debug"] and str(blocker) not in in_pool["batch"]
    unknown = u1.run("job", "update", str(pending), "--resource-pool", "nosuch", check=False)
    assert unknown.returncode == 1 and "Invalid partition name" in unknown.stderr
    assert "pools (partitions) open to you: batch, debug" in unknown.stderr
    u1.run("experiment", "kill", str(pending))

    # A search's trials wait as one job array: updates reach its pending tasks.
    search_cfg = tmp / "search.yaml"
    search_cfg.write_text(
        "name: search\nentrypoint: python3 mark.py\nmax_restarts: 0\n"
        "searcher: {name: random, metric: x, max_length: 1, max_trials: 3}\n"
        "hyperparameters: {h: {type: int, minval: 1, maxval: 9}}\n" + WHOLE_CLUSTER)
    search = u1.create(search_cfg, ctx)
    array = ("hpcdet-u1", search)
    u1.wait_for("the search's array pending", lambda: _slurm_jobs().get(array, {}).get(
        "state") == "PENDING", timeout=60)
    # The array's Slurm job id names the experiment too.
    slurm_id = _slurm_jobs()[array]["id"]
    u1.run("job", "update-batch", f"{slurm_id}.priority=45", f"{search}.resource-pool=batch")
    assert {k: _slurm_jobs()[array][k] for k in ("nice", "partition")} == {
        "nice": "300", "partition": "batch"}
    u1.run("experiment", "kill", str(search))

    u1.wait_for("a first checkpoint", lambda: any(
        t["latest_checkpoint"] for t in u1.describe(running)["trials"]), timeout=60)
    u1.run("job", "update", str(running), "--resource-pool", "batch")
    d = u1.wait_state(running, {"COMPLETED", "ERROR"}, timeout=180)
    assert d["experiment"]["state"] == "COMPLETED", d
    assert (parts / "log").read_text().split() == ["debug", "batch"]
    assert [r["outcome"] for r in d["runs"]][0] == "preempted" and len(d["runs"]) == 2
    assert d["trials"][0]["restarts"] == 0
    training = [(r["steps_completed"], r["metrics"]["x"]) for r in u1.metrics(
        d["trials"][0]["id"]) if r["group"] == "training"]
    assert training == [(s, s) for s in range(10, 61, 10)]
    u1.run("experiment", "kill", str(blocker))
