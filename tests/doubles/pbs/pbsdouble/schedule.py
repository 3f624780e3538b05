"""The scheduling pass: reap lost runners, start the queued jobs that fit, record job ends."""

from __future__ import annotations

import os
import signal
import sys
import time

from .ids import job_id
from .jobs import (
    ACTIVE_STATES,
    JOB_EXEC_FAIL1,
    SUB_BEGUN,
    SUB_FAILED,
    SUB_FINISHED,
    SUB_HELD,
    SUB_QUEUED,
    SUB_RUNNING,
    SUB_TERMINATED,
    active_units,
    drop_if_no_history,
    get_unit,
    queued_indices,
    refresh_array_state,
)
from .nodes import track_nodes
from .procs import killpg, pid_alive, proc_start_time, spawn_detached
from .resources import exec_strings, host_table, hosts_for_queue, shortage_comment, try_place
from .state import RUNNER_PATH, Store
from .units import comment_time

# ---------------------------------------------------------------------------------------------
# Scheduling pass.
# ---------------------------------------------------------------------------------------------


def schedule_pass(store: Store, now: float | None = None) -> None:
    """One scheduling cycle: reap lost runners, then start queued jobs that fit on the hosts
    their queue may use, in order Priority (higher first) then queue order (as changed by
    qorder.1B), then record the hosts' states for pbsnodes."""
    now = now or time.time()
    cfg = store.cfg
    reap_lost_runners(store, now)
    hosts = host_table(cfg)
    free = {h["name"]: {"ncpus": h["ncpus"], "ngpus": h["ngpus"], "mem": h["mem"]} for h in hosts}
    busy: set = set()
    exclusive: set = set()
    for _job, _idx, unit in active_units(store):
        for h, r in unit.get("alloc") or []:
            if h not in free:
                continue
            free[h]["ncpus"] -= r.get("ncpus", 0)
            free[h]["ngpus"] -= r.get("ngpus", 0)
            if free[h]["mem"] is not None:
                free[h]["mem"] -= r.get("mem", 0)
            busy.add(h)
            if unit.get("excl"):
                exclusive.add(h)
    empty = {h["name"]: {"ncpus": h["ncpus"], "ngpus": h["ngpus"], "mem": h["mem"]}
             for h in hosts}
    order = {s: i for i, s in enumerate(store.st["order"])}
    cands = [j for j in store.jobs.values() if j["state"] in ("Q", "W", "B")]
    cands.sort(key=lambda j: (-int(j.get("priority", 0)), order.get(j["seq"], 1 << 30)))
    for job in cands:
        if job["state"] == "W":
            # qsub.1B -a: "Point in time after which the job is eligible for execution."
            if job.get("exec_time", 0) > now:
                continue
            job["state"], job["substate"] = ("H", SUB_HELD) if job["hold"] != "n" else (
                "Q", SUB_QUEUED)
            store.dirty = True
            if job["state"] != "Q":
                continue
        if job["hold"] != "n" or job.get("deleted"):
            continue
        chunks, place = job["chunks"], job["place"]
        eligible = hosts_for_queue(hosts, job["queue"])
        slots = 1
        arr = job.get("array")
        if arr is not None:
            waiting = queued_indices(job)
            running = sum(1 for s in arr["subjobs"].values() if s["state"] in ACTIVE_STATES)
            limit = arr.get("max_run")
            # qsub.1B -J ... %<max subjobs>: "limit on the number of subjobs that can be
            # running at one time" (max_run_subjobs).
            slots = len(waiting) if not limit else max(0, min(len(waiting), limit - running))
            if not waiting:
                continue
        started = 0
        while started < slots:
            alloc = try_place(chunks, place, free, busy, exclusive, eligible)
            if alloc is None:
                never = try_place(chunks, place, empty, set(), set(), eligible) is None
                comment = shortage_comment(chunks, free, eligible, never)
                # An array that has begun keeps "Job Array Began at ...".
                if started == 0 and job["state"] == "Q" and job.get("comment") != comment:
                    job["comment"] = comment
                    store.dirty = True
                break
            for h, r in alloc:
                free[h]["ncpus"] -= r.get("ncpus", 0)
                free[h]["ngpus"] -= r.get("ngpus", 0)
                if free[h]["mem"] is not None:
                    free[h]["mem"] -= r.get("mem", 0)
                busy.add(h)
                if place["sharing"] in ("excl", "exclhost"):
                    exclusive.add(h)
            index = queued_indices(job)[0] if arr is not None else None
            start_unit(store, job, index, alloc, now)
            started += 1
    track_nodes(store, now)


def start_unit(store: Store, job: dict, index: int | None, alloc: list, now: float) -> None:
    cfg = store.cfg
    if index is None:
        unit = job
    else:
        unit = {"index": index}
        job["array"]["subjobs"][str(index)] = unit
        if not job.get("stime"):
            job["stime"] = now
            # Array parents carry "Job Array Began at <date>".
            job["comment"] = f"Job Array Began at {comment_time(now)}"
    eh, ev = exec_strings(alloc)
    unit.update({
        "state": "R", "substate": SUB_RUNNING, "stime": now, "mtime": now,
        "exec_host": eh, "exec_vnode": ev, "alloc": [[h, r] for h, r in alloc],
        "excl": job["place"]["sharing"] in ("excl", "exclhost"),
        "comment": f"Job run at {comment_time(now)} on {ev}",
        "run_count": unit.get("run_count", 0) + 1, "session_id": None,
        "jobcookie": os.urandom(16).hex().upper(),
    })
    if index is not None:
        job["mtime"] = now
        job["state"], job["substate"] = "B", SUB_BEGUN
    jid = job_id(cfg, job, index)
    aux = os.path.join(store.home, "aux")
    os.makedirs(aux, exist_ok=True)
    env = {"PBS_DOUBLE_HOME": store.home, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "LANG": os.environ.get("LANG", "C.UTF-8")}
    argv = [sys.executable, RUNNER_PATH, "_runner", job["seq"], "" if index is None else str(index)]
    pid = spawn_detached(argv, env, os.path.join(aux, f"{jid}.runner.log"))
    unit["runner_pid"] = pid
    unit["runner_start"] = proc_start_time(pid)
    store.dirty = True


def reap_lost_runners(store: Store, now: float) -> None:
    """A runner that died without recording its job's end (killed, crashed) would leave the job
    running forever; end such jobs here."""
    lost = [(j, i, u) for j, i, u in active_units(store)
            if u.get("runner_pid") and not pid_alive(u["runner_pid"], u.get("runner_start"))]
    for job, index, unit in lost:
        killpg(unit.get("session_id"), signal.SIGKILL)
        unit["comment"] = (unit.get("comment", "") +
                           " and lost: pbsdouble job runner vanished").strip()
        finish_unit(store, job, index, JOB_EXEC_FAIL1, now)


def finish_unit(store: Store, job: dict, index: int | None, status: int | None,
                now: float) -> None:
    unit = get_unit(job, index)
    unit["state"] = "F" if index is None else "X"
    # job.h: 91 deleted, 93 failed (an exit status other than 0), 92 finished.
    unit["substate"] = (SUB_TERMINATED if unit.get("deleted") else
                        SUB_FINISHED if status in (0, None) else SUB_FAILED)
    if status is not None:
        unit["exit_status"] = status
    unit["mtime"] = unit["obittime"] = unit["end"] = now
    unit["runner_pid"] = None
    store.dirty = True
    if index is not None:
        job["mtime"] = now
        refresh_array_state(job, now, store.cfg.get("job_history_enable", True))
    drop_if_no_history(store, job)
