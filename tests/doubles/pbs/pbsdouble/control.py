"""Commands that change jobs: qdel, qhold, qrls, qalter, qorder, qmove, qsig."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time

from .cmdline import getopt
from .errors import (
    PBSE_BADATVAL,
    PBSE_BADSTATE,
    PBSE_HISTJOBID,
    PBSE_IVALREQ,
    PBSE_MODATRRUN,
    PBSE_PERM,
    PBSE_UNKSIG,
    PbsError,
    UsageError,
    eprint,
)
from .ids import JobRef
from .jobs import (
    SUB_HELD,
    SUB_QUEUED,
    SUB_TERMINATED,
    drop_if_no_history,
    refresh_array_state,
)
from .plumbing import (
    Resolved,
    _finished_guard,
    current_user,
    parse_destination,
    queue_check,
    report,
    resolve,
    run_per_job,
)
from .procs import killpg
from .resources import parse_l_option, resolve_resources
from .schedule import schedule_pass
from .state import PBS_VERSION, Store, double_home, load_config
from .units import fmt_duration, parse_duration

# ---------------------------------------------------------------------------------------------
# qdel
# ---------------------------------------------------------------------------------------------


def _kill_unit(unit: dict, force: bool, by: str) -> None:
    # Measured on 23.06.06: qdel is asynchronous. The job stays R (1-2 s there) until the MoM
    # reports its end; the server adds "and terminated by user@host" to the comment at once.
    if not unit.get("deleted"):
        unit["comment"] = f"{unit.get('comment', '')} and terminated by {by}".strip()
    unit["kill_requested"] = True
    unit["deleted"] = True
    unit["mtime"] = time.time()
    # qdel.1B: "The MoM deletes a PBS job by sending a SIGTERM signal, then, if there are
    # remaining processes, a SIGKILL signal" (after kill_delay, handled by the runner).
    killpg(unit.get("session_id"), signal.SIGKILL if force else signal.SIGTERM)
    if unit.get("runner_pid"):
        with contextlib.suppress(OSError):
            os.kill(unit["runner_pid"], signal.SIGUSR1)


def qdel_main(argv: list[str]) -> int:
    usage = ("usage: qdel [-W force|suppress_email=X] [-x] job_identifier...\n"
             "       qdel --version")
    if argv == ["--version"]:
        print(f"pbs_version = {PBS_VERSION}")
        return 0
    try:
        pairs, ids, _ = getopt("qdel", argv, "W:x")
    except UsageError as e:
        eprint(str(e))
        eprint(usage)
        return 2
    force = any(c == "W" and v.strip() == "force" for c, v in pairs)
    purge = any(c == "x" for c, _ in pairs)
    if not ids or any(c == "W" and not (v.strip() == "force" or v.strip().startswith(
            "suppress_email=")) for c, v in pairs):
        eprint(usage)
        return 2

    def act(store: Store, r: Resolved) -> None:
        job, now = r.job, time.time()
        deleter = f"{job['owner']}@{job['submit_host']}"
        hist = store.cfg.get("job_history_enable", True)
        if job["state"] == "F":
            if purge:  # qdel.1B -x: "Deletes job history for specified job(s)."
                store.jobs.pop(job["seq"], None)
                store.st["order"].remove(job["seq"])
                store.dirty = True
                return
            raise PbsError(PBSE_HISTJOBID)
        store.dirty = True
        if job.get("array") is None:
            if job["state"] in ("R", "E"):
                _kill_unit(job, force, deleter)
                return
            # The server appends " and terminated" to the comment of a job qdel ends
            # (e.g. "Not Running: ... and terminated").
            job.update({"state": "F", "substate": SUB_TERMINATED, "mtime": now,
                        "obittime": now, "deleted": True,
                        "comment": f"{job.get('comment', '')} and terminated".strip()})
            if purge:
                store.jobs.pop(job["seq"], None)
                store.st["order"].remove(job["seq"])
                return
            drop_if_no_history(store, job)
            return
        arr = job["array"]
        if r.ref.is_sub:
            done = 0
            for i in r.ref.indices():
                if i not in arr["indices"]:
                    continue
                sub = arr["subjobs"].get(str(i))
                if sub is None:
                    arr["subjobs"][str(i)] = {"index": i, "state": "X",
                                              "substate": SUB_TERMINATED, "mtime": now,
                                              "deleted": True}
                    done += 1
                elif sub["state"] in ("R", "E"):
                    _kill_unit(sub, force, deleter)
                    done += 1
            if not done:
                raise PbsError(PBSE_BADSTATE)
            refresh_array_state(job, now, hist)
            drop_if_no_history(store, job)
            return
        # "<seq>[]": every subjob (qdel.1B OPERANDS: job array identifiers).
        job["deleted"] = True
        job["comment"] = f"{job.get('comment', '')} and terminated".strip()
        for sub in arr["subjobs"].values():
            if sub["state"] in ("R", "E"):
                _kill_unit(sub, force, deleter)
        refresh_array_state(job, now, hist)
        drop_if_no_history(store, job)

    return run_per_job("qdel", ids, act)


# ---------------------------------------------------------------------------------------------
# qhold / qrls
# ---------------------------------------------------------------------------------------------


def _hold_common(cmd: str, argv: list[str], hold: bool) -> int:
    usage = f"usage: {cmd} [-h hold_list] job_identifier_list\n       {cmd} --version"
    if argv == ["--version"]:
        print(f"pbs_version = {PBS_VERSION}")
        return 0
    try:
        pairs, ids, _ = getopt(cmd, argv, "h:")
    except UsageError as e:
        eprint(str(e))
        eprint(usage)
        return 2
    types = "u"
    for _c, v in pairs:
        types = v
    # qhold.1B -h: one or more of u, o, s in any combination, or one of n or p.
    if not ids or not (re.fullmatch(r"[uos]+", types) or types in ("n", "p")):
        eprint(usage)
        return 2

    def act(store: Store, r: Resolved) -> None:
        job = r.job
        if r.ref.is_sub:
            # qhold.1B: "Can be used on jobs and job arrays, but not on subjobs".
            raise PbsError(PBSE_IVALREQ)
        _finished_guard(r)
        # qhold.1B Effect of Privilege: o, s and p need Operator/Manager/administrator.
        if set(types) & set("osp"):
            raise PbsError(PBSE_PERM)
        if types == "n":
            return
        if job["state"] == "E":
            raise PbsError(PBSE_BADSTATE)
        store.dirty = True
        now = time.time()
        if hold:
            # Running job without checkpointing: "qhold simply sets the job's Hold_Types
            # attribute to u. The job continues to execute." (qhold.1B)
            job["hold"] = "u"
            if job["state"] == "Q":
                job["state"], job["substate"] = "H", SUB_HELD
        else:
            job["hold"] = "n"
            if job["state"] == "H":
                job["state"], job["substate"] = "Q", SUB_QUEUED
                job["etime"] = now  # pbs_job_attributes.7B etime: reset when released
        job["mtime"] = now

    return run_per_job(cmd, ids, act)


def qhold_main(argv: list[str]) -> int:
    return _hold_common("qhold", argv, True)


def qrls_main(argv: list[str]) -> int:
    return _hold_common("qrls", argv, False)


# ---------------------------------------------------------------------------------------------
# qalter
# ---------------------------------------------------------------------------------------------
QALTER_USAGE = """usage: qalter [-a date_time] [-A account_string] [-c interval] [-e path]
\t[-h hold_list] [-j y|n] [-k keep] [-J X-Y[:Z]] [-l resource_list]
\t[-m mail_options] [-M user_list] [-N jobname] [-o path] [-p priority]
\t[-R o|e|oe] [-r y|n] [-S path] [-u user_list] [-W dependency_list]
\t[-P project_name] job_identifier...
       qalter --version"""


def qalter_main(argv: list[str]) -> int:
    if argv == ["--version"]:
        print(f"pbs_version = {PBS_VERSION}")
        return 0
    try:
        pairs, ids, _ = getopt("qalter", argv, "a:A:c:e:h:j:k:l:m:M:N:o:p:r:R:S:u:W:P:")
    except UsageError as e:
        eprint(str(e))
        eprint(QALTER_USAGE)
        return 2
    if not ids:
        eprint(QALTER_USAGE)
        return 2
    changes: dict = {}
    res: dict = {}
    for c, v in pairs:
        if c == "l":
            try:
                parse_l_option(v, res, None, True)
            except (UsageError, PbsError):
                eprint("qalter: illegal -l value")
                eprint(QALTER_USAGE)
                return 2
        elif c == "p":
            try:
                prio = int(v.strip())
            except ValueError:
                prio = 99999
            # qsub.1B -p range [-1024, +1023]; out of range the server rejects the value and
            # qalter prints "qalter: illegal -p value" + usage and exits 2
            # (src/cmds/qalter.c handle_attribute_errors()).
            if not -1024 <= prio <= 1023:
                eprint("qalter: illegal -p value")
                eprint(QALTER_USAGE)
                return 2
            changes["priority"] = prio
        elif c == "r":
            if v not in ("y", "n"):
                eprint("qalter: illegal -r value")
                eprint(QALTER_USAGE)
                return 2
            changes["rerunable"] = v == "y"
        elif c == "N":
            changes["name"] = v
        elif c == "A":
            changes["account"] = v
        elif c == "j":
            changes["join"] = v
        elif c in "oe":
            changes[f"{c}_raw"] = v
        else:
            changes.setdefault("other", []).append((c, v))
    if "walltime" in res:
        try:
            res["walltime"] = fmt_duration(parse_duration(res["walltime"]))
        except ValueError:
            eprint("qalter: illegal -l value")
            eprint(QALTER_USAGE)
            return 2

    def act(store: Store, r: Resolved) -> None:
        job = r.job
        if r.ref.is_sub:
            raise PbsError(PBSE_IVALREQ)
        _finished_guard(r)
        running = job["state"] in ("R", "E", "B")
        if res:
            if running:
                # pbs_job_attributes.7B: resources of a running job cannot be changed by an
                # unprivileged user (PBSE_MODATRRUN).
                raise PbsError(PBSE_MODATRRUN)
            merged = dict(job["resources"])
            merged.update(res)
            try:
                chunks, place, rl = resolve_resources(merged)
            except (UsageError, PbsError):
                raise PbsError(PBSE_BADATVAL) from None
            job.update({"chunks": chunks, "place": place, "rl": rl, "resources": merged})
        for k in ("priority", "rerunable", "name", "account", "join"):
            if k in changes:
                job[k] = changes[k]
        job["mtime"] = time.time()
        store.dirty = True

    return run_per_job("qalter", ids, act)


# ---------------------------------------------------------------------------------------------
# qorder, qmove
# ---------------------------------------------------------------------------------------------


def qorder_main(argv: list[str]) -> int:
    usage = "usage: qorder job_identifier job_identifier\n       qorder --version"
    if argv == ["--version"]:
        print(f"pbs_version = {PBS_VERSION}")
        return 0
    if len(argv) != 2 or any(a.startswith("-") for a in argv):
        eprint(usage)
        return 2
    home = double_home("qorder")
    cfg = load_config(home)
    with Store(home, cfg) as store:
        found = []
        for text in argv:
            try:
                r = resolve(store, text)
                # qorder.1B Restrictions: "A job in the running state cannot be reordered";
                # "can be used on job arrays, but not on subjobs or ranges of subjobs".
                if r.ref.is_sub:
                    raise PbsError(PBSE_IVALREQ)
                _finished_guard(r)
                if r.job["state"] not in ("Q", "H", "W"):
                    raise PbsError(PBSE_BADSTATE)
                found.append(r)
            except PbsError as e:
                try:
                    full = JobRef(text, cfg["server"]).full
                except ValueError:
                    full = text
                return report("qorder", e, full)
        order = store.st["order"]
        a, b = order.index(found[0].job["seq"]), order.index(found[1].job["seq"])
        order[a], order[b] = order[b], order[a]  # "Exchanges positions in queue(s)"
        store.dirty = True
        schedule_pass(store)
    return 0


def qmove_main(argv: list[str]) -> int:
    usage = "usage: qmove destination job_identifier...\n       qmove --version"
    if argv == ["--version"]:
        print(f"pbs_version = {PBS_VERSION}")
        return 0
    if len(argv) < 2 or argv[0].startswith("-"):
        eprint(usage)
        return 2
    dest_text, ids = argv[0], argv[1:]
    user = current_user()

    def act(store: Store, r: Resolved) -> None:
        job = r.job
        dest = parse_destination(dest_text, store.cfg)
        if r.ref.is_sub:
            raise PbsError(PBSE_IVALREQ)  # qmove.1B: not on subjobs or ranges of subjobs
        _finished_guard(r)
        # qmove.1B: "A job in the Running, Transiting, or Exiting state cannot be moved";
        # arrays only with no running subjobs.
        if job["state"] not in ("Q", "H", "W"):
            raise PbsError(PBSE_BADSTATE)
        queue_check(store.cfg, dest, user)
        now = time.time()
        job["queue"] = dest
        job["qtime"] = job["etime"] = job["mtime"] = now  # etime: "Reset when a job moves"
        order = store.st["order"]
        order.remove(job["seq"])
        order.append(job["seq"])
        store.dirty = True

    return run_per_job("qmove", ids, act)


# ---------------------------------------------------------------------------------------------
# qsig
# ---------------------------------------------------------------------------------------------


def parse_signal(text: str) -> int:
    """qsig.1B SIGNALS: a name (SIGKILL), the name without SIG (KILL), or a number; SIGNULL
    sends signal 0."""
    t = text.strip()
    if re.fullmatch(r"\d+", t):
        n = int(t)
        if n >= signal.NSIG:
            raise PbsError(PBSE_UNKSIG)
        return n
    name = t.upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    if name == "SIGNULL":
        return 0
    sig = getattr(signal.Signals, name, None) if name in signal.Signals.__members__ else None
    if sig is None:
        raise PbsError(PBSE_UNKSIG)
    return int(sig)


def qsig_main(argv: list[str]) -> int:
    usage = "usage: qsig [-s signal] job_identifier...\n       qsig --version"
    if argv == ["--version"]:
        print(f"pbs_version = {PBS_VERSION}")
        return 0
    try:
        pairs, ids, _ = getopt("qsig", argv, "s:")
    except UsageError as e:
        eprint(str(e))
        eprint(usage)
        return 2
    if not ids:
        eprint(usage)
        return 2
    sigtext = "SIGTERM"  # qsig.1B -s: "PBS sends SIGTERM to the job" by default
    for _c, v in pairs:
        sigtext = v

    def deliver(unit: dict, sig: int) -> None:
        if unit.get("session_id"):
            killpg(unit["session_id"], sig)
        else:
            unit.setdefault("pending_signals", []).append(sig)

    def act(store: Store, r: Resolved) -> None:
        job = r.job
        # qsig.1B: suspend/resume/admin-* need Manager or Operator privilege.
        if sigtext in ("suspend", "resume", "admin-suspend", "admin-resume"):
            raise PbsError(PBSE_PERM)
        sig = parse_signal(sigtext)
        _finished_guard(r)
        # qsig.1B Restrictions: rejected if "The job is not in the running or suspended state".
        if job.get("array") is None:
            if job["state"] != "R":
                raise PbsError(PBSE_BADSTATE)
            deliver(job, sig)
            store.dirty = True
            return
        subs = job["array"]["subjobs"]
        wanted = r.ref.indices() if r.ref.is_sub else job["array"]["indices"]
        hit = [subs[str(i)] for i in wanted if str(i) in subs and subs[str(i)]["state"] == "R"]
        if not hit:
            raise PbsError(PBSE_BADSTATE)
        for u in hit:
            deliver(u, sig)
        store.dirty = True

    return run_per_job("qsig", ids, act)
