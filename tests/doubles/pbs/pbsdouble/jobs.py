"""The job model: states, substates, array subjobs and the units that run."""

from __future__ import annotations

from .state import Store

# ---------------------------------------------------------------------------------------------
# Job model helpers.  A normal job is its own "unit"; an array parent keeps its started/ended
# subjobs in job['array']['subjobs'][str(index)] (queued subjobs are implied).
# ---------------------------------------------------------------------------------------------
# Special exit values (src/include/job.h "Special Job Exit Values").
JOB_EXEC_FAIL1 = -1
JOB_EXEC_KILL_WALLTIME = -29

# Substates (src/include/job.h JOB_SUBSTATE_*).
SUB_QUEUED, SUB_HELD, SUB_WAITING = 10, 20, 30
SUB_RUNNING, SUB_EXITING, SUB_BEGUN = 42, 50, 70
SUB_TERMINATED, SUB_FINISHED, SUB_FAILED = 91, 92, 93

FINAL_STATES = ("F", "X")
ACTIVE_STATES = ("R", "E")


def ordered_jobs(store: Store) -> list[dict]:
    jobs = store.jobs
    return [jobs[s] for s in store.st["order"] if s in jobs]


def queued_indices(job: dict) -> list[int]:
    arr = job["array"]
    return [i for i in arr["indices"] if str(i) not in arr["subjobs"]]


def array_counts(job: dict) -> dict:
    arr = job["array"]
    c = {"Queued": len(queued_indices(job)), "Running": 0, "Exiting": 0, "Expired": 0}
    for sub in arr["subjobs"].values():
        if sub["state"] == "R":
            c["Running"] += 1
        elif sub["state"] == "E":
            c["Exiting"] += 1
        elif sub["state"] == "X":
            c["Expired"] += 1
    return c


def refresh_array_state(job: dict, now: float, history: bool) -> None:
    """Array parent state (qstat.1B: B = array job has at least one subjob running; F when
    finished)."""
    if job["state"] == "F":
        return
    c = array_counts(job)
    if job.get("deleted") and c["Queued"]:
        for i in queued_indices(job):
            job["array"]["subjobs"][str(i)] = {"index": i, "state": "X",
                                               "substate": SUB_TERMINATED, "mtime": now}
        c = array_counts(job)
    if c["Queued"] == 0 and c["Running"] == 0 and c["Exiting"] == 0:
        job["state"] = "F"
        job["mtime"] = job["obittime"] = now
        subs = job["array"]["subjobs"].values()
        # Measured on 23.06.06 (src/server/array_func.c, same on master): the parent's
        # Exit_status comes from the LAST subjob to end: 0, 1 (it exited > 0) or 2 (< 0);
        # its substate says 91 if a subjob was deleted, else 93 if any failed, else 92.
        ended = sorted((s for s in subs if "exit_status" in s), key=lambda s: s.get("end", 0))
        if ended:
            last = ended[-1]["exit_status"]
            job["exit_status"] = 0 if last == 0 else (1 if last > 0 else 2)
        if job.get("deleted") or any(s.get("deleted") for s in subs):
            job["substate"], end = SUB_TERMINATED, "terminated"
        elif any(s.get("exit_status", 0) != 0 for s in subs):
            job["substate"], end = SUB_FAILED, "failed"
        else:
            job["substate"], end = SUB_FINISHED, "finished"
        comment = job.get("comment", "")
        if not comment.endswith(" and terminated"):
            job["comment"] = f"{comment} and {end}".strip()
    elif any(sub.get("stime") for sub in job["array"]["subjobs"].values()):
        job["state"], job["substate"] = "B", SUB_BEGUN
    elif job["hold"] != "n":
        job["state"], job["substate"] = "H", SUB_HELD
    else:
        job["state"], job["substate"] = "Q", SUB_QUEUED


def active_units(store: Store):
    for job in store.jobs.values():
        if job.get("array") is None:
            if job["state"] in ACTIVE_STATES:
                yield job, None, job
        else:
            for k, sub in job["array"]["subjobs"].items():
                if sub["state"] in ACTIVE_STATES:
                    yield job, int(k), sub


def get_unit(job: dict, index: int | None) -> dict:
    return job if index is None else job["array"]["subjobs"][str(index)]


def drop_if_no_history(store: Store, job: dict) -> None:
    # pbs_server_attributes.7B job_history_enable: without it finished jobs are purged.
    if not store.cfg.get("job_history_enable", True) and job["state"] == "F":
        store.jobs.pop(job["seq"], None)
        if job["seq"] in store.st["order"]:
            store.st["order"].remove(job["seq"])
