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
SUB_TERMINATED, SUB_FINISHED = 91, 92

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
        job["state"], job["substate"] = "F", SUB_FINISHED
        job["mtime"] = job["obittime"] = now
        # pbs_job_attributes.7B Exit_status: "If any subjob of an array job has non-zero exit
        # status, the array job has non-zero exit status."
        bad = [s for s in job["array"]["subjobs"].values() if s.get("exit_status", 0) != 0]
        if any("exit_status" in s for s in job["array"]["subjobs"].values()) or not bad:
            job["exit_status"] = 1 if bad else 0
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
