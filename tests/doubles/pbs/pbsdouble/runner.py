"""The job runner: a detached process per running job or subjob (environment, output files,
walltime, qdel's SIGKILL escalation, the job's end)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import time

from .ids import job_id
from .jobs import ACTIVE_STATES, JOB_EXEC_FAIL1, JOB_EXEC_KILL_WALLTIME, get_unit
from .procs import killpg
from .schedule import finish_unit, schedule_pass
from .state import BIN_DIR, Store, load_config
from .units import parse_duration

# ---------------------------------------------------------------------------------------------
# The job runner (a detached process per running job or subjob).
# ---------------------------------------------------------------------------------------------


def _job_env(store: Store, job: dict, index: int | None, unit: dict, nodefile: str,
             tmpdir: str, primary: str) -> dict:
    """Job environment: qsub.1B ENVIRONMENT VARIABLES and src/resmom/start_exec.c (PBS_JOBNAME,
    PBS_JOBID, PBS_QUEUE, PBS_JOBCOOKIE, PBS_NODENUM, PBS_TASKNUM, PBS_MOMPORT, PBS_NODEFILE,
    PBS_ACCOUNT, PBS_ARRAY_INDEX, PBS_ARRAY_ID).  The job does not inherit qsub's environment
    (only Variable_List, i.e. PBS_O_* plus -v / -V)."""
    cfg = store.cfg
    variables = dict(job["variables"])
    # Measured on 23.06.06: a script job runs in the user's login shell (PATH from
    # /etc/profile); an executable job (`qsub -- cmd`) does not, and gets PBS_HOME/
    # pbs_environment's PATH=/bin:/usr/bin, without PBS's own bin (pbsdsh: not found).
    executable = bool(job.get("executable"))
    env = {
        "HOME": job["home"], "USER": job["owner"], "LOGNAME": job["owner"],
        "SHELL": job.get("login_shell") or "/bin/bash",
        "PATH": "/bin:/usr/bin" if executable else "/usr/local/bin:/usr/bin:/bin",
    }
    if variables.get("PBS_O_LANG"):
        env["LANG"] = variables["PBS_O_LANG"]
    env.update(variables)
    env.update({
        "PBS_ENVIRONMENT": "PBS_BATCH",
        "PBS_JOBID": job_id(cfg, job, index),
        "PBS_JOBNAME": job["name"],
        "PBS_QUEUE": job["queue"],
        "PBS_NODEFILE": nodefile,
        "PBS_NODENUM": "0",
        "PBS_TASKNUM": "1",
        "PBS_MOMPORT": "15003",
        "PBS_JOBCOOKIE": unit.get("jobcookie", ""),
        "PBS_JOBDIR": job["home"],
        "TMPDIR": tmpdir,
        "PBS_DOUBLE_HOME": store.home,
        "PBS_DOUBLE_HOST": primary,
    })
    if job.get("account"):
        env["PBS_ACCOUNT"] = job["account"]
    if index is not None:
        env["PBS_ARRAY_INDEX"] = str(index)
        env["PBS_ARRAY_ID"] = job_id(cfg, job, None)
    if not executable:
        path = [p for p in env["PATH"].split(":") if p and p != BIN_DIR]
        env["PATH"] = ":".join([BIN_DIR] + path)
    return env


def std_path(job: dict, which: str, index: int | None, jid: str) -> str:
    p = job["out_path"] if which == "o" else job["err_path"]
    if index is not None:
        # qsub.1B/src/include/job.h PBS_FILE_ARRAY_INDEX_TAG "^array_index^".
        p = p.replace("^array_index^", str(index))
    if p.endswith("/") or os.path.isdir(p):
        # qsub.1B -o: "If path does not include a filename, the default filename has the form
        # <job ID>.OU" (.ER for -e).
        p = os.path.join(p, f"{jid}.{'OU' if which == 'o' else 'ER'}")
    return p


def _open_std(store: Store, path: str) -> int:
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    except OSError:
        # Real PBS leaves undeliverable output in the spool's undelivered directory.
        und = os.path.join(store.home, "undelivered")
        os.makedirs(und, exist_ok=True)
        return os.open(os.path.join(und, os.path.basename(path) or "output"),
                       os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)


class _RunnerFlags:
    kill_at: float | None = None


def runner_main(seq: str, index_text: str) -> int:
    home = os.environ["PBS_DOUBLE_HOME"]
    cfg = load_config(home)
    index = int(index_text) if index_text else None
    flags = _RunnerFlags()
    kill_delay = float(cfg.get("kill_delay", 2))
    # The MoM looks at a job's walltime only when it polls its jobs: between min_check_poll (10 s)
    # and max_check_poll (120 s) apart. Measured on 23.06.06: kills 6 s and 19 s late.
    check_poll = float(cfg["check_poll"])

    def on_usr1(signum: int, frame: object) -> None:  # qdel asks for SIGKILL after kill_delay
        if flags.kill_at is None:
            flags.kill_at = time.time() + kill_delay

    def ignore(signum: int, frame: object) -> None:
        pass

    signal.signal(signal.SIGUSR1, on_usr1)
    # Python-level handlers (not SIG_IGN): a caught signal is reset to SIG_DFL by exec, so the
    # job itself still dies on SIGTERM while the runner survives stray ones.
    signal.signal(signal.SIGTERM, ignore)
    signal.signal(signal.SIGHUP, ignore)

    with Store(home, cfg) as store:
        job = store.jobs.get(seq)
        if job is None:
            return 0
        unit = get_unit(job, index)
        if unit["state"] not in ACTIVE_STATES or unit.get("runner_pid") != os.getpid():
            return 0
        jid = job_id(cfg, job, index)
        if unit.get("kill_requested"):
            # Deleted while R but before its script started (a qdel right after the run began):
            # the server had sent it to run, so it ends as a running job qdel'ed does, killed
            # by SIGTERM (Exit_status 256+15), without the script having run.
            finish_unit(store, job, index, 256 + signal.SIGTERM, time.time())
            schedule_pass(store)
            return 0
        job = json.loads(json.dumps(job))
        unit = get_unit(job, index)
    aux = os.path.join(home, "aux")
    nodefile = os.path.join(aux, jid)
    lines = []
    for h, r in unit["alloc"]:
        # The node file has one line per MPI process of each chunk (pbsdsh.1B, qsub.1B).
        lines += [h] * int(r.get("mpiprocs", 1))
    with open(nodefile, "w", encoding="utf-8") as f:
        f.write("".join(f"{h}\n" for h in lines))
    tmpdir = os.path.join(home, "tmp", f"pbs.{jid}")
    os.makedirs(tmpdir, exist_ok=True)
    primary = unit["alloc"][0][0]
    env = _job_env(store, job, index, unit, nodefile, tmpdir, primary)
    with open(os.path.join(aux, f"{jid}.env.json"), "w", encoding="utf-8") as f:
        json.dump(env, f)
    # Default job umask 077 (qsub.1B -W umask: "Default value: 077").
    os.umask(int(job.get("umask", "077"), 8))
    out_p = std_path(job, "o", index, jid)
    err_p = std_path(job, "e", index, jid)
    join = job.get("join", "n")
    out_fd = _open_std(store, out_p) if join != "eo" else None
    err_fd = _open_std(store, err_p) if join != "oe" else None
    if out_fd is None:
        out_fd = err_fd
    if err_fd is None:
        err_fd = out_fd
    if job.get("executable"):
        argv = [job["executable"]] + list(job.get("arguments", []))
    elif job.get("shell_path"):
        argv = [job["shell_path"], job["script"]]
    elif job.get("shebang"):
        argv = [job["script"]]
    else:
        argv = ["/bin/bash", job["script"]]
    import subprocess

    start = time.time()
    try:
        proc = subprocess.Popen(argv, cwd=job["home"], env=env, stdin=subprocess.DEVNULL,
                                stdout=out_fd, stderr=err_fd, start_new_session=True,
                                close_fds=True)
    except OSError as exc:
        os.write(err_fd, f"pbsdouble: cannot execute {argv[0]}: {exc}\n".encode())
        with Store(home, cfg) as store:
            j = store.jobs.get(seq)
            if j is not None:
                finish_unit(store, j, index, JOB_EXEC_FAIL1, time.time())
                schedule_pass(store)
        return 0
    with Store(home, cfg) as store:
        j = store.jobs.get(seq)
        u = get_unit(j, index) if j is not None else {}
        u["session_id"] = proc.pid
        store.dirty = True
        pending = list(u.pop("pending_signals", []))
        kill_requested = bool(u.get("kill_requested"))
    for sig in pending:
        killpg(proc.pid, sig)
    if kill_requested:
        killpg(proc.pid, signal.SIGTERM)
        flags.kill_at = time.time() + kill_delay
    walltime = None
    wt = job["resources"].get("walltime")
    if wt:
        walltime = parse_duration(wt)
    wt_killed = False
    next_check = start + check_poll
    rc = None
    while rc is None:
        try:
            rc = proc.wait(timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            pass
        now = time.time()
        polled = now >= next_check
        if polled:
            next_check = now + check_poll
        if walltime is not None and not wt_killed and polled and now - start > walltime:
            # The MoM kills a job over its walltime (SIGTERM, then SIGKILL after kill_delay),
            # writes "=>> PBS: job killed: walltime <used> exceeded limit <limit>" to the job's
            # stderr, and the job ends with JOB_EXEC_KILL_WALLTIME (-29, src/include/job.h).
            wt_killed = True
            msg = (f"=>> PBS: job killed: walltime {math.ceil(now - start)} exceeded limit "
                   f"{walltime}\n")
            with contextlib.suppress(OSError):
                os.write(err_fd, msg.encode())
            killpg(proc.pid, signal.SIGTERM)
            flags.kill_at = now + kill_delay
        if flags.kill_at is not None and now >= flags.kill_at:
            killpg(proc.pid, signal.SIGKILL)
            flags.kill_at = now + 3600
    # When the top shell exits the MoM kills whatever is left of the job's session.
    killpg(proc.pid, signal.SIGKILL)
    end = time.time()
    if wt_killed:
        status = JOB_EXEC_KILL_WALLTIME
    elif rc < 0:
        status = 256 + (-rc)  # killed by signal N: Exit_status 256+N (e.g. 271 for SIGTERM)
    else:
        status = rc
    for p in (nodefile, os.path.join(aux, f"{jid}.env.json")):
        with contextlib.suppress(OSError):
            os.unlink(p)
    import shutil

    shutil.rmtree(tmpdir, ignore_errors=True)
    with Store(home, cfg) as store:
        j = store.jobs.get(seq)
        if j is None:
            return 0
        u = get_unit(j, index)
        base = u.get("comment", "")
        # The words of 23.06.06 (shared/reference/openpbs-23.06/README.md).
        if wt_killed:
            u["comment"] = f"{base} and exceeded resource walltime"
        elif u.get("deleted"):
            pass  # qdel said "and terminated by ..." when it was asked
        elif status != 0:
            u["comment"] = f"{base} and failed"
        else:
            u["comment"] = f"{base} and finished"
        u["walltime_used"] = end - start
        finish_unit(store, j, index, status, end)
        schedule_pass(store)
    return 0
