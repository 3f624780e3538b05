"""Tests of pbsdouble, the OpenPBS test double in tests/doubles/pbs.

They run the real executables in tests/doubles/pbs/bin with subprocess, each test with its own
PBS_DOUBLE_HOME.  Jobs are kept to a second or less so the file runs in a few seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

BIN = Path(__file__).resolve().parents[2] / "doubles" / "pbs" / "bin"


class Pbs:
    def __init__(self, home: Path, work: Path, config: dict | None = None) -> None:
        self.home = home
        self.work = work
        home.mkdir(parents=True, exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        # check_poll: the MoM's walltime checks 0.1 s apart (10-120 s on a real server).
        cfg = {"kill_delay": 1, "check_poll": 0.1, "acl_roots": ["root"]}
        cfg.update(config or {})
        (home / "config.json").write_text(json.dumps(cfg))
        self.env = dict(os.environ)
        # `#!/usr/bin/env python3` finds this interpreter first (pyenv shims add ~100 ms).
        self.env["PATH"] = f"{BIN}:{Path(sys.executable).parent}:{os.environ['PATH']}"
        self.env["PBS_DOUBLE_HOME"] = str(home)
        self.env.pop("PBS_JOBID", None)

    def run(self, cmd: str, *args: str, env: dict | None = None,
            input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / cmd), *args], cwd=self.work, env=env or self.env,
                              capture_output=True, text=True, timeout=30, input=input)

    def qsub(self, *args: str, **kw) -> str:
        p = self.run("qsub", *args, **kw)
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()

    def script(self, name: str, body: str) -> str:
        path = self.work / name
        path.write_text(body)
        return str(path)

    def jobs(self, *ids: str, x: bool = True, t: bool = False) -> dict:
        args = ["-f", "-F", "json"] + (["-x"] if x else []) + (["-t"] if t else []) + list(ids)
        p = self.run("qstat", *args)
        return json.loads(p.stdout).get("Jobs", {})

    def job(self, jid: str) -> dict:
        return self.jobs(jid)[jid]

    def wait_state(self, jid: str, states: str, timeout: float = 10.0) -> dict:
        deadline = time.time() + timeout
        while True:
            j = self.job(jid)
            if j["job_state"] in states:
                return j
            if time.time() > deadline:
                raise AssertionError(f"{jid} still {j['job_state']}, wanted {states}: {j}")
            time.sleep(0.1)


@pytest.fixture
def pbs(tmp_path: Path) -> Pbs:
    p = Pbs(tmp_path / "pbshome", tmp_path / "work")
    yield p
    kill_all(p.home)


def kill_all(home: Path) -> None:
    """Leave no job processes behind (reads the double's state file directly)."""
    try:
        state = json.loads((home / "state.json").read_text())
    except FileNotFoundError:
        return
    for job in state["jobs"].values():
        units = [job] + list((job.get("array") or {}).get("subjobs", {}).values())
        for u in units:
            for pid, kill in ((u.get("session_id"), os.killpg), (u.get("runner_pid"), os.kill)):
                if pid and u.get("state") in ("R", "E"):
                    try:
                        kill(int(pid), signal.SIGKILL)
                    except OSError:
                        pass


def test_home_must_be_set(pbs: Pbs) -> None:
    env = dict(pbs.env)
    del env["PBS_DOUBLE_HOME"]
    p = pbs.run("qstat", env=env)
    assert p.returncode == 1
    assert "PBS_DOUBLE_HOME" in p.stderr


def test_job_runs_with_the_pbs_environment(pbs: Pbs, tmp_path: Path) -> None:
    script = pbs.script("env.sh", """#!/bin/bash
#PBS -N envjob
#PBS -l select=2:ncpus=2:mpiprocs=3
#PBS -l place=scatter
echo "cwd=$(pwd)"
env | sort
echo "NODEFILE"; cat "$PBS_NODEFILE"
test -d "$TMPDIR" && echo tmpdir-exists
pbsdsh -- bash -c 'echo "task=$PBS_TASKNUM node=$PBS_NODENUM host=$PBS_DOUBLE_HOST \
nodefile=${PBS_NODEFILE:-none}"'
#PBS -N ignored_after_first_command
""")
    env = dict(pbs.env, SECRET_FROM_QSUB="leak", HOME=str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    jid = pbs.qsub("-A", "acct1", "-v", "FOO=bar,QUOTED='a,b'", script, env=env)
    assert jid.endswith(".pbsdouble") and jid.split(".")[0].isdigit()
    j = pbs.wait_state(jid, "F")
    assert j["Job_Name"] == "envjob"
    assert j["Exit_status"] == 0
    assert j["Resource_List"]["select"] == "2:ncpus=2:mpiprocs=3"
    assert j["Resource_List"]["ncpus"] == 4 and j["Resource_List"]["nodect"] == 2
    assert j["exec_host"] == "pbs-a/0*2+pbs-b/0*2"
    assert j["exec_vnode"] == "(pbs-a:ncpus=2)+(pbs-b:ncpus=2)"
    assert j["Variable_List"]["FOO"] == "bar"
    assert j["Variable_List"]["PBS_O_WORKDIR"] == str(pbs.work)
    out = (pbs.work / f"envjob.o{jid.split('.')[0]}").read_text()
    env_lines = dict(ln.split("=", 1) for ln in out.splitlines() if "=" in ln and
                     not ln.startswith(("task=", "cwd=")))
    assert f"cwd={tmp_path / 'home'}" in out  # jobs start in $HOME
    assert env_lines["PBS_JOBID"] == jid
    assert env_lines["PBS_JOBNAME"] == "envjob"
    assert env_lines["PBS_QUEUE"] == "workq"
    assert env_lines["PBS_ENVIRONMENT"] == "PBS_BATCH"
    assert env_lines["PBS_O_WORKDIR"] == str(pbs.work)
    assert env_lines["PBS_ACCOUNT"] == "acct1"
    assert env_lines["FOO"] == "bar" and env_lines["QUOTED"] == "a,b"
    assert env_lines["PBS_NODENUM"] == "0" and env_lines["PBS_TASKNUM"] == "1"
    assert env_lines["PBS_DOUBLE_HOST"] == "pbs-a"
    assert env_lines["PATH"].startswith(f"{BIN}:/usr/local/bin:/usr/bin:/bin")
    assert "SECRET_FROM_QSUB" not in env_lines  # qsub's environment is not inherited
    assert "tmpdir-exists" in out
    nodes = out.split("NODEFILE\n")[1].splitlines()[:6]
    assert nodes == ["pbs-a"] * 3 + ["pbs-b"] * 3
    tasks = sorted(ln for ln in out.splitlines() if ln.startswith("task="))
    assert len(tasks) == 6
    assert {t.split()[2] for t in tasks} == {"host=pbs-a", "host=pbs-b"}
    assert len({t.split()[0] for t in tasks}) == 6  # PBS_TASKNUM unique per task
    assert "node=3 host=pbs-b" in " ".join(tasks)
    # As measured on 23.06.06: 8 hex digits, the node in the top bits; the first node's tasks
    # have no PBS_NODEFILE.
    assert "task=00000002 node=0 host=pbs-a nodefile=none" in tasks
    assert "task=40000001 node=3 host=pbs-b nodefile=" in " ".join(tasks).replace("\n", " ")
    assert all(("nodefile=none" in t) == ("host=pbs-a" in t) for t in tasks)


def test_exit_codes_signals_and_walltime(pbs: Pbs) -> None:
    ok = pbs.qsub("-l", "select=1:ncpus=1", "--", "/bin/sh", "-c", "exit 3")
    killed = pbs.qsub("-l", "select=1:ncpus=1", "--", "/bin/sh", "-c", "kill -9 $$")
    wall = pbs.qsub("-l", "walltime=00:00:01", "-N", "wall", "--", "/bin/sleep", "30")
    assert pbs.wait_state(ok, "F")["Exit_status"] == 3
    assert pbs.wait_state(killed, "F")["Exit_status"] == 256 + 9
    w = pbs.wait_state(wall, "F", timeout=8)
    assert w["Exit_status"] == -29  # JOB_EXEC_KILL_WALLTIME
    assert "walltime" in w["comment"]
    err = (pbs.work / f"wall.e{wall.split('.')[0]}").read_text()
    assert "=>> PBS: job killed: walltime" in err


def test_qdel_running_queued_and_finished(pbs: Pbs) -> None:
    run = pbs.qsub("-l", "select=1:ncpus=4", "--", "/bin/sleep", "30")
    pbs.wait_state(run, "R")
    queued = pbs.qsub("-h", "--", "/bin/sleep", "30")
    assert pbs.job(queued)["job_state"] == "H"
    assert pbs.run("qdel", run, queued).returncode == 0
    j = pbs.wait_state(run, "F")
    assert j["Exit_status"] == 256 + signal.SIGTERM  # 271
    q = pbs.job(queued)
    assert q["job_state"] == "F" and "Exit_status" not in q
    p = pbs.run("qdel", run)
    assert p.returncode == 35 and p.stderr.strip() == f"qdel: Job has finished {run}"
    p = pbs.run("qstat", run)
    assert p.returncode == 35
    assert "Job has finished, use -x or -H" in p.stderr


def test_a_walltime_kill_waits_for_the_mom_s_next_poll(tmp_path: Path) -> None:
    # 23.06.06 killed a 5 s job 19 s late, a 20 s one 6 s late: the MoM checks when it polls.
    pbs = Pbs(tmp_path / "pbshome", tmp_path / "work", {"check_poll": 3})
    try:
        wall = pbs.qsub("-l", "walltime=00:00:01", "-N", "wall", "--", "/bin/sleep", "30")
        pbs.wait_state(wall, "R")
        time.sleep(2)
        assert pbs.job(wall)["job_state"] == "R"  # over its walltime, not killed yet
        w = pbs.wait_state(wall, "F", timeout=10)
        assert w["Exit_status"] == -29 and w["resources_used"]["walltime"] >= "00:00:03"
    finally:
        kill_all(pbs.home)


def test_qdel_is_asynchronous_and_says_who_at_once(pbs: Pbs) -> None:
    s = pbs.script("slow.sh", "trap 'sleep 1; exit 0' TERM\nsleep 30 & wait\n")
    jid = pbs.qsub(s)
    pbs.wait_state(jid, "R")
    assert pbs.run("qdel", jid).returncode == 0
    j = pbs.job(jid)
    assert j["job_state"] == "R"  # as 23.06.06 showed it for 1-2 s
    assert j["comment"].endswith(f" and terminated by {j['Job_Owner']}")
    done = pbs.wait_state(jid, "F", timeout=8)
    assert (done["substate"], done["Exit_status"]) == (91, 0)
    assert done["comment"].count("terminated") == 1


def test_root_is_refused_unless_acl_roots_lists_it(tmp_path: Path) -> None:
    assert os.geteuid() == 0, "the tests run as root (as CI does)"
    pbs = Pbs(tmp_path / "pbshome", tmp_path / "work", {"acl_roots": []})
    p = pbs.run("qsub", "--", "/bin/true")
    assert (p.returncode, p.stderr, p.stdout) == (175, "qsub: Bad UID for job execution\n", "")


def test_an_executable_job_gets_pbs_environment_s_path(pbs: Pbs) -> None:
    # 23.06.06: `qsub -- cmd` is not run through a login shell; PATH=/bin:/usr/bin, no pbsdsh.
    env = pbs.qsub("-N", "envx", "--", "/usr/bin/env")
    dsh = pbs.qsub("--", "/bin/bash", "-c", "pbsdsh -- /bin/true")
    pbs.wait_state(env, "F")
    out = (pbs.work / f"envx.o{env.split('.')[0]}").read_text()
    assert "PATH=/bin:/usr/bin\n" in out
    assert pbs.wait_state(dsh, "F")["Exit_status"] == 127


def test_qdel_escalates_to_sigkill(pbs: Pbs) -> None:
    s = pbs.script("stubborn.sh", "trap '' TERM\nsleep 30 & wait; sleep 30\n")
    jid = pbs.qsub(s)
    pbs.wait_state(jid, "R")
    t0 = time.time()
    pbs.run("qdel", jid)
    # No check of the state right after: a real server's qdel is asynchronous (the job stays
    # R for 1-2 s, openpbs-23.06 reference), so R, E and F are all right there.
    j = pbs.wait_state(jid, "F", timeout=8)
    assert j["Exit_status"] == 256 + 9
    assert time.time() - t0 >= 0.9  # kill_delay = 1


def test_array_jobs(pbs: Pbs) -> None:
    s = pbs.script("arr.sh", "#!/bin/bash\necho \"$PBS_ARRAY_INDEX $PBS_ARRAY_ID $PBS_JOBID\"\n"
                   "sleep 0.5\n")
    jid = pbs.qsub("-J", "0-6:2%2", "-l", "select=1:ncpus=1", s)
    seq = jid.split("[")[0]
    assert jid == f"{seq}[].pbsdouble"
    seen_running = 0
    deadline = time.time() + 15
    while time.time() < deadline:
        jobs = pbs.jobs(jid, x=True, t=True)
        parent = jobs[jid]
        running = [k for k, v in jobs.items() if v["job_state"] == "R"]
        assert len(running) <= 2  # %2 = max_run_subjobs
        seen_running = max(seen_running, len(running))
        if parent["job_state"] == "F":
            break
        assert parent["job_state"] in "QB"
        time.sleep(0.1)
    assert seen_running == 2
    assert parent["array"] == "True"
    assert parent["array_indices_submitted"] == "0-6:2"
    assert parent["array_state_count"] == "Queued:0 Running:0 Exiting:0 Expired:4"
    assert parent["Exit_status"] == 0
    sub = jobs[f"{seq}[4].pbsdouble"]
    assert sub["job_state"] == "F" and sub["array_index"] == 4  # X only while it ran
    assert sub["array_id"] == jid
    out = (pbs.work / f"arr.sh.o{seq}.4").read_text()
    assert out.split() == ["4", jid, f"{seq}[4].pbsdouble"]


def test_array_parent_json_while_running(pbs: Pbs) -> None:
    jid = pbs.qsub("-J", "1-5", "-l", "select=1:ncpus=4", "--", "/bin/sleep", "5")
    seq = jid.split("[")[0]
    parent = pbs.wait_state(jid, "B")
    assert parent["array_state_count"] == "Queued:3 Running:2 Exiting:0 Expired:0"
    assert parent["array_indices_remaining"] == "3-5"
    assert pbs.run("qdel", f"{seq}[4]").returncode == 0
    assert pbs.job(jid)["array_indices_remaining"] == "3,5"
    assert pbs.run("qdel", jid).returncode == 0
    parent = pbs.wait_state(jid, "F")
    assert parent["array_state_count"].endswith("Expired:5")


def test_scheduling_order_priority_qorder_and_holds(pbs: Pbs) -> None:
    block_a = pbs.qsub("-l", "select=1:ncpus=4", "--", "/bin/sleep", "30")
    block_b = pbs.qsub("-l", "select=1:ncpus=4", "--", "/bin/sleep", "30")
    pbs.wait_state(block_b, "R")
    a = pbs.qsub("-N", "a", "-l", "select=1:ncpus=4", "--", "/bin/sleep", "30")
    b = pbs.qsub("-N", "b", "-l", "select=1:ncpus=4", "--", "/bin/sleep", "30")
    c = pbs.qsub("-N", "c", "-p", "10", "-l", "select=1:ncpus=4", "--", "/bin/sleep", "1")
    never = pbs.qsub("-l", "select=1:ncpus=5", "--", "/bin/true")
    assert pbs.job(a)["comment"] == ("Not Running: Insufficient amount of resource: "
                                     "ncpus (R: 4 A: 0 T: 8)")
    assert pbs.job(never)["comment"] == ("Can Never Run: Insufficient amount of resource: "
                                         "ncpus (R: 5 A: 0 T: 4)")
    assert pbs.run("qhold", c).returncode == 0  # c has the highest priority, but is held
    assert pbs.job(c)["job_state"] == "H"
    assert pbs.run("qorder", a, b).returncode == 0
    p = pbs.run("qorder", a, block_a)
    assert p.returncode == 168
    assert p.stderr.strip() == f"qorder: Request invalid for state of job {block_a}"
    assert pbs.run("qdel", block_a).returncode == 0  # frees one host
    pbs.wait_state(b, "R")  # b was put ahead of a by qorder
    assert pbs.job(a)["job_state"] == "Q"
    assert pbs.run("qrls", c).returncode == 0
    pbs.run("qdel", block_b)
    pbs.wait_state(c, "RF")
    assert pbs.job(a)["job_state"] == "Q"  # priority 10 went first
    assert pbs.wait_state(c, "F")["Exit_status"] == 0
    pbs.wait_state(a, "R")
    assert pbs.job(never)["job_state"] == "Q"
    pbs.run("qdel", a, b)


def test_priority_orders_the_queue(pbs: Pbs) -> None:
    blocker = pbs.qsub("-l", "select=2:ncpus=4", "--", "/bin/sleep", "30")
    pbs.wait_state(blocker, "R")
    low = pbs.qsub("-l", "select=2:ncpus=4", "--", "/bin/sleep", "30")
    high = pbs.qsub("-l", "select=2:ncpus=4", "--", "/bin/sleep", "30")
    p = pbs.run("qalter", "-p", "1024", high)
    assert p.returncode == 2 and "qalter: illegal -p value" in p.stderr
    assert pbs.job(high)["Priority"] == 0
    assert pbs.run("qalter", "-p", "1023", high).returncode == 0
    assert pbs.run("qalter", "-p", "-5", blocker).returncode == 0  # running jobs too
    assert pbs.job(blocker)["Priority"] == -5
    pbs.run("qdel", blocker)
    pbs.wait_state(high, "R")
    assert pbs.job(low)["job_state"] == "Q"
    pbs.run("qdel", high, low)


def test_qalter_walltime_and_qmove(pbs: Pbs) -> None:
    q = pbs.qsub("-h", "-l", "walltime=10:00", "--", "/bin/true")
    assert pbs.run("qalter", "-l", "walltime=00:00:30", q).returncode == 0
    assert pbs.job(q)["Resource_List"]["walltime"] == "00:00:30"
    assert pbs.run("qmove", "gpuq", q).returncode == 0
    assert pbs.job(q)["queue"] == "gpuq"
    p = pbs.run("qmove", "nosuch", q)
    assert p.returncode == 170 and p.stderr.strip() == f"qmove: Unknown queue {q}"
    p = pbs.run("qmove", "closedq", q)
    assert p.returncode == 159 and "Unauthorized Request" in p.stderr
    r = pbs.qsub("--", "/bin/sleep", "30")
    pbs.wait_state(r, "R")
    p = pbs.run("qmove", "gpuq", r)
    assert p.returncode == 168 and "Request invalid for state of job" in p.stderr
    p = pbs.run("qalter", "-l", "walltime=1:00:00", r)
    assert p.returncode == 167
    pbs.run("qdel", r, q)


def test_qsig(pbs: Pbs) -> None:
    s = pbs.script("sig.sh", "trap 'echo got-usr1' USR1\nfor i in $(seq 50); do sleep 0.1; done\n")
    jid = pbs.qsub("-N", "sig", s)
    pbs.wait_state(jid, "R")
    time.sleep(0.3)
    assert pbs.run("qsig", "-s", "USR1", jid).returncode == 0
    assert pbs.run("qsig", "-s", "SIGNULL", jid).returncode == 0
    p = pbs.run("qsig", "-s", "BOGUS", jid)
    assert p.returncode == 165 and "Unknown/illegal signal name" in p.stderr
    assert pbs.run("qsig", "-s", "9", jid).returncode == 0
    j = pbs.wait_state(jid, "F")
    assert j["Exit_status"] == 265
    assert "got-usr1" in (pbs.work / f"sig.o{jid.split('.')[0]}").read_text()
    p = pbs.run("qsig", jid)
    assert p.returncode == 35


def test_qsub_errors(pbs: Pbs) -> None:
    s = pbs.script("j.sh", "true\n")
    p = pbs.run("qsub", "-q", "nosuch", s)
    assert (p.returncode, p.stderr.strip()) == (170, "qsub: Unknown queue")
    p = pbs.run("qsub", "-q", "closedq", s)
    assert p.returncode == 159 and p.stderr.startswith("qsub: Unauthorized Request")
    p = pbs.run("qsub", "-Y", s)
    assert p.returncode == 2 and "usage: qsub" in p.stderr
    p = pbs.run("qsub", "-J", "0-20000", s)
    assert p.returncode == 3
    assert p.stderr.strip() == "qsub: Array job exceeds server or queue size limit"
    p = pbs.run("qsub", "-r", "n", "-J", "0-3", s)
    assert p.returncode == 2 and "cannot submit non-rerunable Array Job" in p.stderr
    p = pbs.run("qsub", "-l", "select=1:ncpus=1:bogus=3", s)
    assert p.returncode != 0 and "Unknown resource" in p.stderr
    p = pbs.run("qsub", "-p", "2000", s)
    assert p.returncode == 2
    p = pbs.run("qsub", str(pbs.work / "missing.sh"))
    assert p.returncode != 0 and "No such file" in p.stderr
    assert pbs.jobs() == {}


def test_qstat_ids_and_unknown(pbs: Pbs) -> None:
    a = pbs.qsub("-h", "--", "/bin/true")
    arr = pbs.qsub("-h", "-J", "1-3", "--", "/bin/true")
    seq, aseq = a.split(".")[0], arr.split("[")[0]
    p = pbs.run("qstat", seq, "99", f"{aseq}[]", f"{aseq}[2]")
    assert p.returncode == 153
    assert p.stderr.strip() == "qstat: Unknown Job Id 99.pbsdouble"
    ids = [ln.split()[0] for ln in p.stdout.splitlines()[2:]]
    assert ids == [a, arr, f"{aseq}[2].pbsdouble"]
    assert pbs.run("qstat", aseq).returncode == 153  # an array needs its "[]"
    p = pbs.run("qstat", "-f", "-F", "json", "99")
    assert p.returncode == 153
    assert "Jobs" not in json.loads(p.stdout)
    p = pbs.run("qstat", "-t")
    assert len(p.stdout.splitlines()) == 2 + 1 + 1 + 3
    p = pbs.run("qstat", "-f", a)
    assert p.stdout.startswith(f"Job Id: {a}\n    Job_Name = STDIN\n")
    assert pbs.run("qstat", "-J").stdout.count("\n") == 3
    pbs.run("qdel", a, arr)


def test_json_leading_zero_defect(pbs: Pbs) -> None:
    jid = pbs.qsub("-h", "-v", "FOO=005,BAR=7,BAZ=x", "--", "/bin/true")
    p = pbs.run("qstat", "-f", "-F", "json", jid)
    assert '"FOO":005' in p.stdout  # openpbs issue #1255, on purpose
    assert '"BAR":7' in p.stdout and '"BAZ":"x"' in p.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(p.stdout)
    pbs.run("qdel", jid)


def test_history_disabled(tmp_path: Path) -> None:
    pbs = Pbs(tmp_path / "h", tmp_path / "w", {"job_history_enable": False})
    jid = pbs.qsub("--", "/bin/true")
    deadline = time.time() + 10
    while pbs.run("qstat", jid).returncode == 0:
        assert time.time() < deadline
        time.sleep(0.1)
    p = pbs.run("qstat", "-x", jid)
    assert p.returncode == 153


def test_qmgr(pbs: Pbs) -> None:
    p = pbs.run("qmgr", "-c", "list server")
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert lines[0] == "Server pbsdouble"
    assert "    server_state = Active" in lines
    assert "    default_queue = workq" in lines
    assert "    max_array_size = 10000" in lines
    assert "    job_history_enable = True" in lines
    p = pbs.run("qmgr", "-c", "print server")
    assert "create queue workq" in p.stdout and "set server default_queue = workq" in p.stdout
    p = pbs.run("qmgr", "-c", "list queue closedq")
    assert "    acl_users = nobody" in p.stdout
    p = pbs.run("qmgr", "-c", "list queue nosuch")
    assert p.returncode == 170 and "Unknown queue" in p.stderr
    p = pbs.run("qmgr", "-c", "set server scheduling = False")
    assert p.returncode == 159


def test_pbsdsh_needs_a_job(pbs: Pbs) -> None:
    env = {k: v for k, v in pbs.env.items() if not k.startswith("PBS_") or k ==
           "PBS_DOUBLE_HOME"}
    p = pbs.run("pbsdsh", "--", "true", env=env)
    assert p.returncode == 1 and "not executing under PBS" in p.stderr
    s = pbs.script("dsh.sh", "pbsdsh -n 1 -- bash -c 'echo one $PBS_DOUBLE_HOST'\n"
                   "pbsdsh -c 3 -s -- bash -c 'echo c $PBS_NODENUM'\n"
                   "pbsdsh -- bash -c 'exit 4'; echo rc=$?\n")
    jid = pbs.qsub("-N", "dsh", "-l", "select=2:ncpus=1", "-l", "place=scatter", s)
    pbs.wait_state(jid, "F")
    out = (pbs.work / f"dsh.o{jid.split('.')[0]}").read_text().splitlines()
    assert "one pbs-b" in out
    assert [ln for ln in out if ln.startswith("c ")] == ["c 0", "c 1", "c 0"]
    # src/cmds/pbsdsh.c reports failed tasks but exits 0.
    assert sum("exit status 4" in ln for ln in out) == 2 and "rc=0" in out


def test_concurrent_submissions(pbs: Pbs) -> None:
    with ThreadPoolExecutor(8) as ex:
        ids = list(ex.map(lambda _: pbs.qsub("-h", "--", "/bin/true"), range(16)))
    assert len(set(ids)) == 16
    assert len(pbs.jobs()) == 16
    t0 = time.time()
    assert pbs.run("qstat").returncode == 0
    assert time.time() - t0 < 1.0
    assert pbs.run("qdel", *ids).returncode == 0


def test_qsub_directives_and_defaults(pbs: Pbs) -> None:
    s = pbs.script("d.sh", "#!/bin/bash\n# comment\n\n#PBS -N fromscript\n#PBS -j oe\n"
                   "#PBS -r n\n#PBS -o out.txt\necho hello; echo err >&2\n#PBS -N late\n")
    jid = pbs.qsub("-N", "cmdline", s)
    j = pbs.wait_state(jid, "F")
    assert j["Job_Name"] == "cmdline"  # command line beats directives
    assert j["Rerunable"] == "False" and j["Join_Path"] == "oe"
    assert j["Output_Path"].endswith(":" + str(pbs.work / "out.txt"))
    assert (pbs.work / "out.txt").read_text() == "hello\nerr\n"
    p = pbs.run("qsub", input="#PBS -N fromstdin\ntrue\n")
    assert pbs.job(p.stdout.strip())["Job_Name"] == "fromstdin"


def test_pbsnodes_json_and_text(pbs: Pbs) -> None:
    jid = pbs.qsub("-l", "select=1:ncpus=2", "--", "/bin/sleep", "30")
    pbs.wait_state(jid, "R")
    p = pbs.run("pbsnodes", "-a", "-F", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)  # the leading-zero check of pbs_json.c keeps this valid JSON
    assert (doc["pbs_version"], doc["pbs_server"]) == ("23.06.06", "pbsdouble")
    assert list(doc["nodes"]) == ["pbs-a", "pbs-b"]
    a, b = doc["nodes"]["pbs-a"], doc["nodes"]["pbs-b"]
    assert list(a) == ["Mom", "ntype", "state", "pcpus", "jobs", "resources_available",
                       "resources_assigned", "resv_enable", "sharing", "license",
                       "last_state_change_time", "last_used_time"]
    assert "Port" not in a and "pbs_version" not in a  # Operator/Manager only
    assert (a["Mom"], a["ntype"], a["state"], a["pcpus"]) == ("pbs-a", "PBS", "free", 4)
    assert a["jobs"] == [jid]
    assert a["resources_available"] == {"arch": "linux", "host": "pbs-a", "ncpus": 4,
                                        "vnode": "pbs-a"}
    assert a["resources_assigned"] == {"ncpus": 2}  # only non-zero values in JSON
    assert b["resources_assigned"] == {} and "jobs" not in b
    assert '"resources_assigned":{\n            },' in p.stdout  # generate_json's empty object
    assert isinstance(a["last_state_change_time"], int)
    p = pbs.run("pbsnodes", "-a")
    assert p.stdout.startswith("pbs-a\n     Mom = pbs-a\n     ntype = PBS\n     state = free\n")
    assert f"     jobs = {jid}/0, {jid}/1\n" in p.stdout
    assert "     resources_assigned.ncpus = 2\n     resources_assigned.vmem = 0kb\n" in p.stdout
    assert "     resources_assigned.mem = 0kb\n" in p.stdout  # zeros are printed in text
    assert "\n\npbs-b\n     Mom = pbs-b\n" in p.stdout  # an empty line after each node
    assert p.stdout.endswith("\n\n") and "last_used_time = " in p.stdout
    assert pbs.run("pbsnodes", "-av").stdout.split("last_state")[0] == \
        p.stdout.split("last_state")[0]
    p = pbs.run("pbsnodes", "-a", "-F", "dsv", "-D", ";")
    assert p.stdout.startswith(f"Name=pbs-a;Mom=pbs-a;ntype=PBS;state=free;pcpus=4;"
                               f"jobs={jid}/0,{jid}/1;resources_available.arch=linux;")
    before = a["last_used_time"]
    time.sleep(1.1)
    pbs.run("qdel", jid)
    pbs.wait_state(jid, "F")
    a = json.loads(pbs.run("pbsnodes", "-F", "json", "pbs-a").stdout)["nodes"]["pbs-a"]
    assert "jobs" not in a and a["resources_assigned"] == {}
    assert a["last_used_time"] > before  # "finished being used for a job"


def test_pbsnodes_states_options_and_errors(pbs: Pbs) -> None:
    busy = pbs.qsub("-l", "select=1:ncpus=4", "--", "/bin/sleep", "30")
    excl = pbs.qsub("-l", "select=1:ncpus=1", "-l", "place=excl", "--", "/bin/sleep", "30")
    pbs.wait_state(excl, "R")
    nodes = json.loads(pbs.run("pbsnodes", "-a", "-F", "json").stdout)["nodes"]
    assert nodes["pbs-a"]["state"] == "job-busy"  # all CPUs allocated
    assert nodes["pbs-b"]["state"] == "job-exclusive"  # place=excl
    assert nodes["pbs-b"]["jobs"] == [excl]
    p = pbs.run("pbsnodes", "pbs-a", "nosuch")  # host operands
    assert p.returncode == 1 and p.stdout.startswith("pbs-a\n")
    assert p.stderr == "Node: nosuch,  Error: Unknown node \n"
    p = pbs.run("pbsnodes", "nosuch", "PBS-B", "-F", "json")  # options after operands too
    assert p.returncode == 0  # in JSON an unknown node is an entry, not a failure
    nodes = json.loads(p.stdout)["nodes"]
    assert list(nodes) == ["nosuch", "pbs-b"]  # operand order; host names ignore case
    assert nodes["nosuch"] == {"Error": "Unknown node "}
    assert pbs.run("pbsnodes", "-v", "pbs-b").stdout.startswith("pbs-b\n     Mom = pbs-b\n")
    for args in ([], ["-v"], ["-a", "-l"], ["-F", "xml", "-a"], ["-H"]):
        p = pbs.run("pbsnodes", *args)
        assert p.returncode == 1 and p.stderr.startswith("usage:\tpbsnodes "), args
    p = pbs.run("pbsnodes", "-o", "pbs-a")
    assert (p.returncode, p.stderr) == (1, "Error marking node pbs-a - Unauthorized Request \n")
    p = pbs.run("pbsnodes", "-l")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")  # nothing is down or offline
    assert pbs.run("pbsnodes", "--version").stdout == "pbs_version = 23.06.06\n"
    assert pbs.run("pbsnodes", "-H", "pbs-b").stdout.startswith("pbs-b\n")
    pbs.run("qdel", busy, excl)


def test_queue_associated_node(tmp_path: Path) -> None:
    pbs = Pbs(tmp_path / "h", tmp_path / "w", {"hosts": [
        {"name": "pbs-a", "ncpus": 2, "ngpus": 0},
        {"name": "pbs-g", "ncpus": 2, "ngpus": 1, "mem": "8gb", "queue": "gpuq"}]})
    try:
        g = pbs.qsub("-q", "gpuq", "-l", "select=1:ncpus=1:ngpus=1:mem=1gb", "--",
                     "/bin/sleep", "30")
        w1 = pbs.qsub("-l", "select=1:ncpus=2", "--", "/bin/sleep", "30")
        w2 = pbs.qsub("-l", "select=1:ncpus=1", "--", "/bin/sleep", "30")
        big = pbs.qsub("-q", "gpuq", "-l", "select=1:ncpus=3", "--", "/bin/true")
        assert pbs.wait_state(g, "R")["exec_host"] == "pbs-g/0"
        assert pbs.wait_state(w1, "R")["exec_host"] == "pbs-a/0*2"
        # pbs_node_attributes.7B queue: only gpuq's jobs on pbs-g, gpuq's jobs only there.
        assert pbs.job(w2)["job_state"] == "Q"
        assert pbs.job(w2)["comment"] == ("Not Running: Insufficient amount of resource: "
                                          "ncpus (R: 1 A: 0 T: 2)")
        assert pbs.job(big)["comment"] == ("Can Never Run: Insufficient amount of resource: "
                                           "ncpus (R: 3 A: 1 T: 2)")
        nodes = json.loads(pbs.run("pbsnodes", "-a", "-F", "json").stdout)["nodes"]
        assert "queue" not in nodes["pbs-a"] and "ngpus" not in nodes["pbs-a"][
            "resources_available"]
        n = nodes["pbs-g"]
        assert n["queue"] == "gpuq"
        assert n["resources_available"]["mem"] == "8388608kb"
        assert n["resources_available"]["ngpus"] == 1
        assert n["resources_assigned"] == {"mem": "1048576kb", "ncpus": 1, "ngpus": 1}
        text = pbs.run("pbsnodes", "pbs-g").stdout
        assert "     queue = gpuq\n" in text and "resources_assigned.ngpus = 1\n" in text
        assert "    hasnodes = True\n" in pbs.run("qmgr", "-c", "list queue gpuq").stdout
        assert "hasnodes" not in pbs.run("qmgr", "-c", "list queue workq").stdout
        pbs.run("qdel", g, w1, w2, big)
    finally:
        kill_all(pbs.home)


# -- following real OpenPBS 23.06.06 (tests/unit/schedulers/pbs_samples, issue 39) -----------

SAMPLES = Path(__file__).resolve().parents[1] / "schedulers" / "pbs_samples"


def _sample_jobs(name: str) -> dict:
    return json.loads((SAMPLES / name).read_text())["Jobs"]


def _same_shape(real: dict, ours: dict, what: str) -> None:
    """Every attribute both have is of the same JSON type, nested ones too."""
    for key in real.keys() & ours.keys():
        if isinstance(real[key], dict):
            _same_shape(real[key], ours[key], f"{what}.{key}")
        elif key != "Job_Name":  # a string unless it looks numeric, in both
            assert type(real[key]) is type(ours[key]), (f"{what}.{key}", real[key], ours[key])


def test_u_with_json_gives_the_text_table_and_a_skeleton_as_23_06(pbs: Pbs) -> None:
    from hpcdet.schedulers.pbs_status import parse_qstat_json

    jid = pbs.qsub("-J", "0-3%2", "-N", "arr", "--", "/bin/sleep", "5")
    pbs.wait_state(jid, "B")
    p = pbs.run("qstat", "-f", "-F", "json", "-t", "-u", os.environ.get("USER", "root"))
    real = (SAMPLES / "qstat-f-json-t-u.json").read_text()
    assert p.returncode == 0
    with pytest.raises(ValueError):
        json.loads(p.stdout)
    table, _, skeleton = p.stdout.partition("\n{")
    real_table, _, real_skeleton = real.partition("\n{")
    assert table.splitlines()[2:5] == real_table.splitlines()[2:5]  # the headings
    rows = table.splitlines()[5:]
    assert [r.split()[0] for r in rows] == [jid.replace("[]", f"[{i}]") for i in range(4)]
    assert [r.split()[-2] for r in rows] == ["R", "R", "Q", "Q"]
    assert json.loads("{" + skeleton).keys() == json.loads("{" + real_skeleton).keys()
    with pytest.raises(ValueError, match="text table"):
        parse_qstat_json(p.stdout)


def test_json_types_and_keys_follow_23_06(pbs: Pbs) -> None:
    jid = pbs.qsub("-J", "0-3%2", "-N", "arr", "--", "/bin/sleep", "1")
    pbs.wait_state(jid, "B")
    ours = pbs.jobs(jid, x=False, t=True)
    real = _sample_jobs("qstat-f-json-t.json")
    _same_shape(real["3[].pbshead"], ours[jid], "parent")
    assert ours[jid]["array"] == "True"
    assert ours[jid]["array_state_count"] == "Queued:2 Running:2 Exiting:0 Expired:0"
    running, queued = (ours[jid.replace("[]", f"[{i}]")] for i in (0, 3))
    _same_shape(real["3[0].pbshead"], running, "running subjob")
    _same_shape(real["3[1].pbshead"], queued, "queued subjob")
    assert running["array_index"] == 0
    assert "array_id" not in queued and "array_index" not in queued  # as 3[1] in the sample
    pbs.wait_state(jid, "F", timeout=15)
    history = pbs.jobs(jid, t=True)
    real = _sample_jobs("arr-x-t.json")
    for key, state in history.items():
        assert (state["job_state"], state["substate"], state["Exit_status"]) == ("F", 92, 0)
        _same_shape(real["3[].pbshead" if key == jid else "3[1].pbshead"], state, key)
    assert history[jid]["comment"].endswith(" and finished")
    plain = pbs.qsub("-N", "123", "--", "/bin/true")
    done = pbs.wait_state(plain, "F")
    _same_shape(_sample_jobs("mpi2-x.json")["17.pbshead"], done, "job")
    assert done["Job_Name"] == 123  # a JSON number, as vars.json's first job


def test_ends_have_the_substates_and_comments_of_23_06(pbs: Pbs) -> None:
    failed = pbs.qsub("--", "/bin/bash", "-c", "exit 3")
    killed = pbs.qsub("--", "/bin/bash", "-c", "kill -9 $$")
    wall = pbs.qsub("-l", "walltime=00:00:01", "--", "/bin/sleep", "30")
    deleted = pbs.qsub("--", "/bin/sleep", "30")
    pbs.wait_state(deleted, "R")
    assert pbs.run("qdel", deleted).returncode == 0
    user = pbs.job(deleted)["Job_Owner"]
    ends = {j: pbs.wait_state(j, "F") for j in (failed, killed, wall, deleted)}
    got = {j: (e["substate"], e.get("Exit_status"), e["comment"].rpartition(") and ")[2])
           for j, e in ends.items()}
    assert got == {failed: (93, 3, "failed"), killed: (93, 265, "failed"),
                   wall: (93, -29, "exceeded resource walltime"),
                   deleted: (91, 271, f"terminated by {user}")}


def test_an_array_s_exit_status_is_its_last_subjob_s(pbs: Pbs) -> None:
    # Index 1 fails at once, 0 and 2 end later with 0: the parent gets 0, substate 93.
    jid = pbs.qsub("-J", "0-2", "--", "/bin/bash", "-c",
                   '[ "$PBS_ARRAY_INDEX" = 1 ] && exit 3; sleep 1')
    sub = jid.replace("[]", "[1]")
    deadline = time.time() + 10
    while (s := pbs.jobs(sub, t=True)[sub])["job_state"] != "X" and time.time() < deadline:
        time.sleep(0.1)
    assert (s["job_state"], s["substate"], s["Exit_status"]) == ("X", 93, 3)
    assert pbs.job(jid)["job_state"] == "B"
    parent = pbs.wait_state(jid, "F", timeout=15)
    assert (parent["Exit_status"], parent["substate"]) == (0, 93)
    assert parent["comment"].endswith(" and failed")
    assert pbs.jobs(sub, t=True)[sub]["job_state"] == "F"  # X only while the array runs


def test_qsub_v_refuses_a_value_with_a_quote_as_23_06(pbs: Pbs) -> None:
    said = (SAMPLES / "qsub-v-quoting.log").read_text()
    for value in ('BAR=x"y', "BAZ=it's"):
        assert value in said and "cannot send environment with the job\n[rc=1]" in said
        p = pbs.run("qsub", "-v", value, "--", "/bin/true")
        assert (p.returncode, p.stderr) == (1, "qsub: cannot send environment with the job\n")
    jid = pbs.qsub("-v", "FOO=a b", "--", "/bin/true")
    assert pbs.wait_state(jid, "F")["Variable_List"]["FOO"] == "a b"


def test_a_runner_starting_survives_a_qdel_s_signal(tmp_path: Path) -> None:
    # A qdel right after the job went R signals a runner still starting Python, before its
    # handlers are in: the default action killed it and the job ended "lost" (CI, loaded).
    sys.path.insert(0, str(Path(__file__).parents[2] / "doubles" / "pbs"))
    try:
        from pbsdouble.procs import spawn_detached
    finally:
        sys.path.pop(0)
    pid = spawn_detached(["/bin/sleep", "5"], {}, str(tmp_path / "log"))
    try:
        for sig in (signal.SIGUSR1, signal.SIGTERM, signal.SIGHUP):
            os.kill(pid, sig)
        time.sleep(0.3)
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        assert state in "RS", state  # not Z: dead and not yet reaped
    finally:
        os.kill(pid, signal.SIGKILL)
