"""Shared command plumbing: the user, queue checks, job operands, the per-job loop."""

from __future__ import annotations

import os
import pwd

from .errors import (
    PBSE_HISTJOBID,
    PBSE_PERM,
    PBSE_UNKJOBID,
    PBSE_UNKQUE,
    PbsError,
    eprint,
    exit_code,
)
from .ids import JobRef
from .schedule import schedule_pass
from .state import Store, double_home, load_config

# ---------------------------------------------------------------------------------------------
# Shared command plumbing.
# ---------------------------------------------------------------------------------------------


def current_user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def queue_check(cfg: dict, queue: str, user: str) -> None:
    if queue not in cfg["queues"]:
        raise PbsError(PBSE_UNKQUE)
    acl = (cfg["queues"][queue] or {}).get("acl_users")
    # pbs_queue_attributes.7B acl_users / acl_user_enable: a user not in the list is refused
    # (the server answers PBSE_PERM, "Unauthorized Request").
    if acl is not None and user not in acl:
        raise PbsError(PBSE_PERM)


def parse_destination(dest: str, cfg: dict) -> str:
    # qsub.1B -q / qmove.1B: <queue>, @<server>, <queue>@<server>.
    q = dest.split("@", 1)[0]
    return q or cfg["default_queue"]


class Resolved:
    def __init__(self, job: dict, ref: JobRef) -> None:
        self.job = job
        self.ref = ref

    @property
    def is_array_parent(self) -> bool:
        return self.job.get("array") is not None and self.ref.bracket == ""


def resolve(store: Store, text: str) -> Resolved:
    try:
        ref = JobRef(text, store.cfg["server"])
    except ValueError:
        raise PbsError(-1, "illegally formed job identifier:") from None
    job = store.jobs.get(ref.seq)
    if job is None or ref.foreign:
        raise PbsError(PBSE_UNKJOBID)
    is_array = job.get("array") is not None
    # An array is named "<seq>[]"; a plain "<seq>" (or a subscript on a non-array) is unknown.
    if is_array != (ref.bracket is not None):
        raise PbsError(PBSE_UNKJOBID)
    if ref.is_sub:
        idxs = set(job["array"]["indices"])
        if not any(i in idxs for i in ref.indices()):
            raise PbsError(PBSE_UNKJOBID)
    return Resolved(job, ref)


def report(cmd: str, err: PbsError, full_id: str) -> int:
    if err.code == -1:  # client-side: src/cmds/qalter.c "illegally formed job identifier: %s"
        eprint(f"{cmd}: illegally formed job identifier: {full_id}")
        return 1
    eprint(f"{cmd}: {err.text} {full_id}")
    return exit_code(err.code)


def run_per_job(cmd: str, ids: list[str], action) -> int:
    """Apply action(store, resolved) to each id under one lock, like the commands' per-operand
    loop (any failure sets the exit status to that error's pbs_errno)."""
    home = double_home(cmd)
    cfg = load_config(home)
    rc = 0
    with Store(home, cfg) as store:
        for text in ids:
            try:
                r = resolve(store, text)
                action(store, r)
            except PbsError as e:
                try:
                    full = JobRef(text, cfg["server"]).full
                except ValueError:
                    full = text
                rc = report(cmd, e, full)
        schedule_pass(store)
    return rc


def _finished_guard(r: Resolved) -> None:
    j = r.job
    if j["state"] == "F":
        raise PbsError(PBSE_HISTJOBID)
