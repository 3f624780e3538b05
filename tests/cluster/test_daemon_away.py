"""A daemon that outlives the login node (issue 42), on the real Slurm: supervised by cron or
run in batch jobs, taken over from a login node that died, and going on across an outage of
slurmctld. The login nodes are the test cluster's login1 and login2: network and UTS
namespaces that share this machine's filesystem."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import Hpcdet

STEPS = 16
TRIAL = (
    "import time\n"
    "import determined as det\n"
    "with det.core.init() as core:\n"
    f"    for i in range({STEPS}):\n"
    "        time.sleep(1.5)\n"
    "        core.train.report_training_metrics(steps_completed=i + 1,\n"
    "                                           metrics={'loss': 1.0 / (i + 1)})\n"
    f"    core.train.report_validation_metrics(steps_completed={STEPS},\n"
    "        metrics={'loss': core.info.trial.hparams['lr']})\n"
)
LEASE = 20


def _search(h: Hpcdet, tmp_path: Path, trials: int = 3, step_seconds: float = 1.5
            ) -> tuple[Path, Path]:
    ctx = h.mkdir(tmp_path / "ctx")
    (ctx / "train.py").write_text(TRIAL.replace("time.sleep(1.5)", f"time.sleep({step_seconds})"))
    cfg = tmp_path / "search.yaml"
    cfg.write_text(
        "name: away\nentrypoint: python3 train.py\nmax_restarts: 0\n"
        "hyperparameters: {lr: {type: double, minval: 0.1, maxval: 1.0}}\n"
        f"searcher: {{name: random, metric: loss, max_length: {STEPS}, max_trials: {trials},"
        " max_concurrent_trials: 2}\n")
    return cfg, ctx


def _lease(h: Hpcdet) -> None:
    (h.root / "cluster.yaml").write_text(f"backend: slurm\ndaemon_lease: {LEASE}\n")


def _on(name: str, root: Path, tmp_path: Path) -> Hpcdet:
    """hpcdet as run on login node ``name``: a network filesystem under the state (so the
    database is on the host's own disk) and a local directory of that host's."""
    return Hpcdet(root, "slurm", {"HPCDET_FSTYPE": "nfs",
                                  "HPCDET_LOCAL_DIR": str(tmp_path / f"local-{name}")},
                  wrap=["nsenter", f"--net=/run/netns/{name}", f"--uts=/run/hpcdet-uts/{name}"])


def _record(h: Hpcdet) -> dict[str, Any]:
    path = h.state / "daemon.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _reporting(h: Hpcdet, exp_id: int) -> int:
    """How many of the experiment's trials have reported metrics."""
    return sum(bool(h.metrics(t["id"])) for t in h.describe(exp_id)["trials"])


def _each_metric_once(h: Hpcdet, d: dict[str, Any]) -> None:
    assert d["experiment"]["state"] == "COMPLETED", d
    assert {t["state"] for t in d["trials"]} == {"COMPLETED"}, d["trials"]
    for t in d["trials"]:
        steps = sorted(m["steps_completed"] for m in h.metrics(t["id"])
                       if m["group"] == "training")
        assert steps == list(range(1, STEPS + 1)), (t["id"], steps)


def test_a_daemon_killed_with_its_login_node_is_taken_over_by_another(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    a, b = _on("login1", tmp_path / "u", tmp_path), _on("login2", tmp_path / "u", tmp_path)
    _lease(a)
    cfg, ctx = _search(a, tmp_path)
    exp = a.create(cfg, ctx)
    held = _record(a)
    assert (held["host"], held["generation"]) == ("login1", 1), held
    a.wait_for("a trial's first metrics", lambda: _reporting(a, exp) > 0)
    assert json.loads(b.run("experiment", "list", "--json").stdout)[0]["id"] == exp
    os.kill(int(held["pid"]), signal.SIGKILL)
    killed = time.time()
    # Within the lease: login2 names where the daemon runs and when its lease ends.
    said = b.run("experiment", "describe", str(exp), check=False)
    assert said.returncode != 0
    assert "runs on host login1 (pid" in said.stderr and "lease ends at" in said.stderr, said
    assert time.time() - killed < LEASE
    status = b.run("daemon", "status", check=False).stdout
    assert "running on host login1" in status and "has not been heard from" in status, status
    last = _record(b)
    assert last["host"] == "login1"
    time.sleep(max(0.0, float(last["heartbeat"]) + LEASE - time.time()) + 1)
    # After it: the first command on login2 starts a daemon there, which takes over.
    d = b.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=300)
    now = _record(b)
    assert (now["host"], now["generation"]) == ("login2", 2), now
    _each_metric_once(b, d)
    b.stop()


def test_cron_starts_a_killed_daemon_again_and_the_search_goes_on(
    slurm_cluster: Any, slurm_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    h = slurm_hpcdet
    assert shutil.which("crontab"), "cron is missing: scripts/slurm-test-cluster.sh installs it"
    said = h.run("daemon", "supervise", "--via", "cron", "--every", "1").stdout
    assert "supervised by cron" in said
    try:
        table = subprocess.run(["crontab", "-l"], capture_output=True, text=True).stdout
        assert str(h.state) in table and "daemon ensure" in table
        cfg, ctx = _search(h, tmp_path)
        exp = h.create(cfg, ctx)
        h.wait_for("a trial's first metrics", lambda: _reporting(h, exp) > 0)
        pid = int(h.daemon_status()["pid"])
        os.kill(pid, signal.SIGKILL)
        # No hpcdet command from here until cron has started the daemon again.
        deadline = time.monotonic() + 150
        while h.daemon_status().get("pid") in (None, pid) or not Path(
                f"/proc/{h.daemon_status()['pid']}").exists():
            assert time.monotonic() < deadline, "cron did not start the daemon within 150 s"
            time.sleep(1)
        d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=300)
        _each_metric_once(h, d)
        log = next(h.state.rglob("supervise.log"))
        assert "daemon started on host" in log.read_text()
        assert stat.S_IMODE(log.stat().st_mode) == 0o600  # not cron's umask
        assert "supervision: cron on" in h.run("daemon", "status").stdout
    finally:
        h.run("daemon", "supervise", "--off")
    assert str(h.state) not in subprocess.run(["crontab", "-l"], capture_output=True,
                                              text=True).stdout
    h.stop()


def test_the_daemon_in_a_batch_job_is_followed_by_its_successor(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    h = Hpcdet(tmp_path / "u", "slurm", {"HPCDET_FSTYPE": "nfs",
                                         "HPCDET_LOCAL_DIR": str(tmp_path / "login-local")})
    _lease(h)
    said = h.run("daemon", "supervise", "--via", "job", "--walltime", "30").stdout
    assert "supervised by batch jobs" in said
    try:
        h.wait_for("the daemon in its job", lambda: bool(_record(h).get("job")) and
                   _record(h).get("host") in slurm_cluster.nodes, timeout=120)
        first = _record(h)
        cfg, ctx = _search(h, tmp_path)
        exp = h.create(cfg, ctx)  # through the request files, read through its copy
        h.wait_for("a trial's first metrics", lambda: _reporting(h, exp) > 0)
        # Its node fails: the job's processes die at once, with no word to the lease.
        subprocess.run(["scancel", "--full", "--signal=KILL", first["job"]], check=True)
        h.wait_for("the successor job's daemon", lambda: _record(h).get("job") not in
                   (None, first["job"]) and _record(h).get("running"), timeout=180)
        assert _record(h)["generation"] == first["generation"] + 1
        d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=300)
        _each_metric_once(h, d)
        assert "supervision: batch jobs" in h.run("daemon", "status").stdout
    finally:
        h.run("daemon", "supervise", "--off")


@pytest.mark.exclusive
def test_a_search_goes_on_across_three_minutes_without_slurmctld(
    slurm_cluster: Any, slurm_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    """Trials that end while slurmctld is down end by their exit files, and the array's next
    tasks wait in it for slurmctld; a search created meanwhile is refused for now and held,
    not failed; polls back off; `daemon status` says since when the scheduler has not
    answered."""
    h = slurm_hpcdet
    # Trials of about a minute: the daemon may store metrics a sweep late on a loaded machine,
    # and slurmctld must go while the first two train (their job steps made) and the last two
    # still wait in Slurm.
    cfg, ctx = _search(h, tmp_path, trials=4, step_seconds=4)
    exp = h.create(cfg, ctx)
    h.wait_for("two trials training and two tasks pending",
               lambda: _reporting(h, exp) == 2 and _tasks(h) == (2, 2))
    pidfile = Path("/run/hpcdet-slurm/slurmctld.pid")
    subprocess.run(["kill", pidfile.read_text().strip()], check=True)
    down = time.monotonic()
    try:
        h.wait_for("the daemon to see the scheduler gone",
                   lambda: "scheduler_unreachable" in h.daemon_status(), timeout=90)
        status = h.run("daemon", "status").stdout
        assert "the scheduler has not answered since" in status, status
        # A search created now: sbatch is refused for now ("Unable to contact slurm
        # controller"), which holds the submission instead of failing the experiment.
        late = h.create(*_search(h, tmp_path / "late", trials=1))
        h.wait_for("the submission held", lambda: bool(h.daemon_status().get(
            "submissions_held")), timeout=90)
        assert "Unable to contact slurm controller" in h.daemon_status()["submissions_held"]
        assert "submissions held" in h.run("daemon", "status").stdout
        # The first trials end by their exit files: no scheduler says so.
        h.wait_for("the first trials to end", lambda: [
            t["state"] for t in h.describe(exp)["trials"]][:2] == ["COMPLETED"] * 2,
            timeout=120)
        while time.monotonic() - down < 180:
            for d in (h.describe(exp), h.describe(late)):
                assert d["experiment"]["state"] == "ACTIVE", d
                assert "ERROR" not in {t["state"] for t in d["trials"]}, d["trials"]
            time.sleep(5)
    finally:
        subprocess.run(["bash", str(slurm_cluster.script), "start"], check=True,
                       capture_output=True)
    for exp_id in (exp, late):
        _each_metric_once(h, h.wait_state(exp_id, {"COMPLETED", "ERROR"}, timeout=300))
    log = h.daemon_log()
    assert "the scheduler answers again" in log and "refused a submission for now" in log
    status = h.daemon_status()
    assert "scheduler_unreachable" not in status and not status.get("submissions_held")


def _tasks(h: Hpcdet) -> tuple[int, int]:
    """The array tasks of ``h``'s trials (their directory is under its state) that Slurm
    runs and holds pending."""
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%t %Z"], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    states = [line.split()[0] for line in out if str(h.state) in line]
    return states.count("R"), states.count("PD")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_daemons_stopped_by_their_cpu_limit_at_any_moment_lose_nothing(
    slurm_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    """RLIMIT_CPU as `ulimit -t` sets it, set on the running daemon with prlimit: SIGXCPU at
    the soft limit (the daemon stops cleanly), SIGKILL at the hard one (soft = hard here: the
    kernel kills it outright)."""
    h = slurm_hpcdet
    cfg, ctx = _search(h, tmp_path, trials=4)
    exp = h.create(cfg, ctx)
    stops = {"clean": 0, "killed": 0}
    for round_ in range(40):
        if h.describe(exp)["experiment"]["state"] != "ACTIVE":
            break
        pid = int(h.daemon_status()["pid"])
        # Whole seconds, as RLIMIT_CPU counts, and already passed: the kernel signals the
        # daemon as it next runs, in whatever part of its tick that is.
        soft = math.floor(_cpu_seconds(pid))
        hard = soft if round_ % 2 else soft + 5
        subprocess.run(["prlimit", f"--pid={pid}", f"--cpu={soft}:{hard}"], check=True)
        deadline = time.monotonic() + 120
        while Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().split(
                ")")[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the daemon outlived its CPU limit"
            time.sleep(0.2)
        stops["killed" if round_ % 2 else "clean"] += 1
        time.sleep(round_ % 4)  # the search goes on meanwhile
        h.run("daemon", "start")  # as supervision would
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=300)
    _each_metric_once(h, d)
    assert stops["clean"] >= 1 and stops["killed"] >= 1, stops
    assert "the CPU time limit (ulimit -t) is reached" in h.daemon_log()


def test_the_preemption_drill_from_a_login_node_without_the_daemon(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    """The drill reads its experiment through the daemon on login1, which hands login2 copies
    of its database: a new one at each look, or the drill would wait on the first for ever."""
    a, b = _on("login1", tmp_path / "u", tmp_path), _on("login2", tmp_path / "u", tmp_path)
    a.run("daemon", "start")
    assert _record(a)["host"] == "login1"
    p = b.run("doctor", "--json", "--preemption", "--timeout", "40", "--drill-timeout", "90",
              check=False, timeout=180)
    found = {f["check"]: f for f in json.loads(p.stdout)["findings"]}
    drill = found["preemption drill"]
    assert drill["status"] == "ok", drill
    assert "checkpointed and stopped (preempted)" in drill["seen"], drill
    assert _record(b)["host"] == "login1"  # no daemon was started on login2
    a.stop()
