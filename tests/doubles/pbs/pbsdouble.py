"""pbsdouble: a test DOUBLE of an OpenPBS 23.06 server, made of real executables.

This is not PBS.  It is a small stand-in so that hpcdet's PBS backend can be tested end to end
on a machine where no PBS server can be installed.  The executables in ``bin/`` (qsub, qstat,
qdel, qalter, qorder, qmove, qhold, qrls, qsig, qmgr, pbsdsh) each call one ``*_main`` function
of this module.  There is no long-lived server: the queue lives in ``$PBS_DOUBLE_HOME/state.json``
guarded by ``fcntl.flock`` on ``$PBS_DOUBLE_HOME/state.lock``; every command does its own work
and then a scheduling pass under that lock, and every job's detached runner process does one
more pass when its job ends.

Behaviour follows the OpenPBS man pages (doc/man1/*.1B, doc/man8/*.8B of openpbs/openpbs) and,
where the pages are silent, the OpenPBS sources (src/cmds/*.c, src/include/*.h).  Each behaviour
below cites its source in a comment.  Deliberate deviations are listed in README.md.

Only the standard library is used (Python 3.9+ syntax, tested on 3.11).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import pwd
import re
import signal
import sys
import time

PBS_VERSION = "23.06.06"
LIB_PATH = os.path.abspath(__file__)
BIN_DIR = os.path.join(os.path.dirname(LIB_PATH), "bin")

DEFAULT_CONFIG: dict = {
    "server": "pbsdouble",
    "hosts": [
        {"name": "pbs-a", "ncpus": 4, "ngpus": 0},
        {"name": "pbs-b", "ncpus": 4, "ngpus": 0},
    ],
    "queues": {"workq": {}, "gpuq": {}, "closedq": {"acl_users": ["nobody"]}},
    "default_queue": "workq",
    # pbs_queue_attributes.7B kill_delay: seconds between SIGTERM and SIGKILL (qdel.1B).
    "kill_delay": 2,
    # pbs_server_attributes.7B max_array_size (OpenPBS default 10000).
    "max_array_size": 10000,
    # pbs_server_attributes.7B job_history_enable; qstat.1B -x needs it to show finished jobs.
    "job_history_enable": True,
    # A fresh OpenPBS server numbers its first job 0 (e.g. "0.<server>").
    "first_job_id": 0,
    # src/cmds/pbsdsh.c main() returns 0 even when tasks fail; set True to make the double's
    # pbsdsh exit 1 when any task failed (NOT what OpenPBS does).
    "pbsdsh_fail_exit": False,
}

# ---------------------------------------------------------------------------------------------
# Errors.  Numbers: src/include/pbs_error.h.  A command exits with pbs_errno, which the OS
# truncates to 8 bits (e.g. qstat on an unknown id exits 15001 & 0xff = 153; src/cmds/qstat.c,
# src/cmds/qalter.c main(): "any_failed = pbs_errno; ... exit(any_failed)").
# Texts: the server's messages as the commands print them ("<cmd>: <text> <job id>",
# src/lib/Libcmds/prt_job_err.c).
# ---------------------------------------------------------------------------------------------
PBSE_UNKJOBID = 15001
PBSE_IVALREQ = 15004
PBSE_PERM = 15007
PBSE_UNKSIG = 15013
PBSE_BADATVAL = 15014
PBSE_MODATRRUN = 15015
PBSE_BADSTATE = 15016
PBSE_UNKQUE = 15018
PBSE_UNKRESC = 15035
PBSE_MAXARRAYSIZE = 15107
PBSE_HISTJOBID = 15139

MESSAGES = {
    PBSE_UNKJOBID: "Unknown Job Id",
    PBSE_IVALREQ: "Invalid request",
    PBSE_PERM: "Unauthorized Request ",
    PBSE_UNKSIG: "Unknown/illegal signal name",
    PBSE_BADATVAL: "Illegal attribute or resource value",
    PBSE_MODATRRUN: "Cannot modify attribute while job running ",
    PBSE_BADSTATE: "Request invalid for state of job",
    PBSE_UNKQUE: "Unknown queue",
    PBSE_UNKRESC: "Unknown resource",
    PBSE_MAXARRAYSIZE: "Array job exceeds server or queue size limit",
    PBSE_HISTJOBID: "Job has finished",
}

# Special exit values (src/include/job.h "Special Job Exit Values").
JOB_EXEC_FAIL1 = -1
JOB_EXEC_KILL_WALLTIME = -29

# Substates (src/include/job.h JOB_SUBSTATE_*).
SUB_QUEUED, SUB_HELD, SUB_WAITING = 10, 20, 30
SUB_RUNNING, SUB_EXITING, SUB_BEGUN = 42, 50, 70
SUB_TERMINATED, SUB_FINISHED = 91, 92


class PbsError(Exception):
    """A batch-request error, printed as '<cmd>: <text> <job id>'."""

    def __init__(self, code: int, text: str | None = None) -> None:
        super().__init__(text or MESSAGES.get(code, f"Error ({code})"))
        self.code = code
        self.text = text or MESSAGES.get(code, f"Error ({code})")


class UsageError(Exception):
    """Bad command line: the caller prints the message (if any), the usage, and exits 2."""


def exit_code(code: int) -> int:
    return code & 0xFF


def eprint(*parts: object) -> None:
    print(*parts, file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# Home, config, state.
# ---------------------------------------------------------------------------------------------


def double_home(cmd: str) -> str:
    home = os.environ.get("PBS_DOUBLE_HOME")
    if not home:
        eprint(f"{cmd}: PBS_DOUBLE_HOME is not set; this {cmd} is pbsdouble, a test double of "
               "an OpenPBS server, and keeps its queue in $PBS_DOUBLE_HOME (see "
               "tests/doubles/pbs/README.md)")
        sys.exit(1)
    os.makedirs(home, exist_ok=True)
    return os.path.abspath(home)


def load_config(home: str) -> dict:
    cfg = json.loads(json.dumps(DEFAULT_CONFIG))
    path = os.path.join(home, "config.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            cfg.update(json.load(f))
    return cfg


class Store:
    """The queue state under an exclusive flock, written back atomically if dirty."""

    def __init__(self, home: str, cfg: dict) -> None:
        self.home = home
        self.cfg = cfg
        self.path = os.path.join(home, "state.json")
        self.dirty = False
        self.fd = -1
        self.st: dict = {}

    def __enter__(self) -> Store:
        # Python fds are close-on-exec, so runners started while we hold the lock never
        # inherit it.
        self.fd = os.open(os.path.join(self.home, "state.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            with open(self.path, encoding="utf-8") as f:
                self.st = json.load(f)
        except FileNotFoundError:
            self.st = {"next_seq": int(self.cfg.get("first_job_id", 0)), "order": [], "jobs": {}}
            self.dirty = True
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if self.dirty and exc_type is None:
                tmp = f"{self.path}.{os.getpid()}.tmp"
                with open(tmp, "w", encoding="utf-8") as f:
                    json.dump(self.st, f, separators=(",", ":"))
                os.replace(tmp, self.path)
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)

    @property
    def jobs(self) -> dict:
        return self.st["jobs"]


# ---------------------------------------------------------------------------------------------
# Small parsers and formatters.
# ---------------------------------------------------------------------------------------------


def parse_duration(text: str) -> int:
    """pbs_resources.7B duration: [[hours:]minutes:]seconds[.milliseconds]."""
    parts = text.strip().split(":")
    if not 1 <= len(parts) <= 3 or not all(re.fullmatch(r"\d+(\.\d+)?", p) for p in parts):
        raise ValueError(text)
    total = 0.0
    for p in parts:
        total = total * 60 + float(p)
    return int(total)


def fmt_duration(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


SIZE_UNITS = {"": 1, "b": 1, "w": 8, "kb": 1024, "kw": 8192, "mb": 1024**2, "mw": 8 * 1024**2,
              "gb": 1024**3, "gw": 8 * 1024**3, "tb": 1024**4, "tw": 8 * 1024**4,
              "pb": 1024**5, "pw": 8 * 1024**5}


def parse_size(text: str) -> int:
    """pbs_resources.7B size: integer with optional b|w|kb|mb|gb|tb|pb (or words)."""
    m = re.fullmatch(r"(\d+)([kmgtp]?[bw]?)", str(text).strip().lower())
    if not m:
        raise ValueError(text)
    return int(m.group(1)) * SIZE_UNITS[m.group(2)]


def fmt_kb(nbytes: int) -> str:
    return f"{(nbytes + 1023) // 1024}kb"


def fmt_size(nbytes: int) -> str:
    """A size in the largest unit that keeps it whole (e.g. 4gb), as qstat prints sizes."""
    for unit in ("pb", "tb", "gb", "mb", "kb"):
        if nbytes and nbytes % SIZE_UNITS[unit] == 0:
            return f"{nbytes // SIZE_UNITS[unit]}{unit}"
    return f"{nbytes}b"


def ctime_str(t: float) -> str:
    # qstat -f prints timestamps like ctime(3): "Tue Nov 24 10:00:00 2026".
    return time.ctime(t)


def comment_time(t: float) -> str:
    # Scheduler comments read "Job run at Tue Oct 11 at 08:13 on (...)".
    return time.strftime("%a %b %d at %H:%M", time.localtime(t))


def split_commas(text: str) -> list[str]:
    """Split on commas outside quotes; a backslash protects the next character
    (src/cmds/qsub.c comma_token())."""
    out, cur, quote, i = [], [], "", 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            cur.append(text[i + 1])
            i += 2
            continue
        if c in "'\"":
            if quote == c:
                quote = ""
            elif not quote:
                quote = c
            cur.append(c)
        elif c == "," and not quote:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def unquote(v: str) -> str:
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1]
    return v


def make_argv(line: str) -> list[str]:
    """Split a directive line like src/cmds/qsub.c make_argv(): whitespace separates words,
    quotes group, a backslash escapes one character."""
    words: list[str] = []
    buf: list[str] = []
    have = False
    i = 0
    while i < len(line):
        c = line[i]
        if c in "'\"":
            j = line.find(c, i + 1)
            if j < 0:
                raise UsageError(f"qsub: unmatched {c}")
            buf.append(line[i + 1:j])
            have = True
            i = j + 1
        elif c == "\\" and i + 1 < len(line):
            buf.append(line[i + 1])
            have = True
            i += 2
        elif c.isspace():
            if have:
                words.append("".join(buf))
                buf, have = [], False
            i += 1
        else:
            buf.append(c)
            have = True
            i += 1
    if have:
        words.append("".join(buf))
    return words


def getopt(cmd: str, args: list[str], spec: str) -> tuple[list[tuple[str, str]], list[str], bool]:
    """POSIX getopt (stops at the first operand); errors worded like glibc's.  Returns
    (options, operands, saw_double_dash)."""
    takes = {c: (i + 1 < len(spec) and spec[i + 1] == ":") for i, c in enumerate(spec) if c != ":"}
    opts: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return opts, args[i + 1:], True
        if not a.startswith("-") or a == "-":
            return opts, args[i:], False
        j = 1
        while j < len(a):
            c = a[j]
            if c not in takes:
                raise UsageError(f"{cmd}: invalid option -- '{c}'")
            if takes[c]:
                if j + 1 < len(a):
                    opts.append((c, a[j + 1:]))
                elif i + 1 < len(args):
                    i += 1
                    opts.append((c, args[i]))
                else:
                    raise UsageError(f"{cmd}: option requires an argument -- '{c}'")
                break
            opts.append((c, ""))
            j += 1
        i += 1
    return opts, [], False


def fmt_ranges(indices: list[int], step: int = 1) -> str:
    """Compress indices to 'X-Y[:Z]' runs joined by commas, like array_indices_remaining
    (pbs_job_attributes.7B: 'Range or list of ranges, e.g. 500, 552, 596-1000')."""
    if not indices:
        return "-"
    runs: list[str] = []
    start = prev = indices[0]
    for i in indices[1:] + [None]:  # type: ignore[list-item]
        if i is not None and i - prev == step:
            prev = i
            continue
        if prev == start:
            runs.append(str(start))
        else:
            runs.append(f"{start}-{prev}" + (f":{step}" if step != 1 else ""))
        if i is not None:
            start = prev = i
    return ",".join(runs)


# ---------------------------------------------------------------------------------------------
# Job identifiers: qstat.1B OPERANDS: <seq>[.<server>][@<server>], <seq>[], <seq>[<index>],
# <seq>[<start>-<end>].
# ---------------------------------------------------------------------------------------------
ID_RE = re.compile(r"^(\d+)(?:\[([^\]]*)\])?(?:\.([^@\s]+))?(?:@(\S+))?$")


class JobRef:
    def __init__(self, text: str, server: str) -> None:
        m = ID_RE.match(text)
        if not m:
            raise ValueError(text)
        self.seq = str(int(m.group(1)))
        self.bracket = m.group(2)  # None, "" (array), "3" (subjob) or "2-5[:z]" (range)
        if self.bracket not in (None, "") and not re.fullmatch(r"\d+(-\d+(:\d+)?)?",
                                                              self.bracket):
            raise ValueError(text)
        self.server_given = m.group(3)
        br = "" if self.bracket is None else f"[{self.bracket}]"
        # get_server() completes "12" to "12.<default server>" before printing errors.
        self.full = f"{m.group(1)}{br}.{server}"
        self.foreign = bool(self.server_given) and not (
            self.server_given == server or self.server_given.startswith(server + "."))

    @property
    def is_sub(self) -> bool:
        return self.bracket not in (None, "")

    def indices(self) -> list[int]:
        b = self.bracket or ""
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", b)
        if not m:
            return []
        a = int(m.group(1))
        z = int(m.group(2)) if m.group(2) else a
        return list(range(a, z + 1, int(m.group(3) or 1)))


def job_id(cfg: dict, job: dict, index: int | None = None) -> str:
    if job.get("array") is None:
        return f"{job['seq']}.{cfg['server']}"
    if index is None:
        return f"{job['seq']}[].{cfg['server']}"
    return f"{job['seq']}[{index}].{cfg['server']}"


# ---------------------------------------------------------------------------------------------
# Resources: -l lists, select and place (qsub.1B "Requesting Resources and Placing Jobs",
# pbs_resources.7B).
# ---------------------------------------------------------------------------------------------
INT_CHUNK_RES = {"ncpus", "ngpus", "mpiprocs", "ompthreads"}
SIZE_CHUNK_RES = {"mem", "vmem"}
STR_CHUNK_RES = {"host", "vnode", "arch", "aoe"}
JOB_WIDE_RES = {"walltime", "cput", "ncpus", "ngpus", "mem", "vmem", "mpiprocs", "ompthreads",
                "software", "file", "place", "select", "nodes", "nodect", "soft_walltime",
                "min_walltime", "max_walltime", "preempt_targets"}


def parse_select(text: str) -> list[dict]:
    """select=[N:]chunk[+[N:]chunk ...]; returns [{'count': N, 'res': {...}}]."""
    chunks = []
    for part in text.split("+"):
        items = part.split(":")
        count = 1
        if items and re.fullmatch(r"\d+", items[0]):
            count = int(items.pop(0))
        res: dict = {}
        for it in items:
            if "=" not in it:
                raise UsageError("qsub: illegal -l value")
            k, v = it.split("=", 1)
            if k in INT_CHUNK_RES:
                if not re.fullmatch(r"\d+", v):
                    raise PbsError(PBSE_BADATVAL,
                                   f"Illegal attribute or resource value Resource_List.{k}")
                res[k] = int(v)
            elif k in SIZE_CHUNK_RES:
                try:
                    res[k] = parse_size(v)
                except ValueError:
                    raise PbsError(PBSE_BADATVAL,
                                   f"Illegal attribute or resource value Resource_List.{k}"
                                   ) from None
            elif k in STR_CHUNK_RES:
                res[k] = v
            else:
                raise PbsError(PBSE_UNKRESC, f"Unknown resource: {k}")
        if count < 1:
            raise UsageError("qsub: illegal -l value")
        chunks.append({"count": count, "res": res})
    return chunks


def parse_place(text: str) -> dict:
    """place=[arrangement][:sharing][:grouping] (qsub.1B)."""
    out = {"arrangement": "free", "sharing": "", "group": ""}
    if text.startswith(":"):  # "The place statement cannot begin with a colon."
        raise UsageError("qsub: illegal -l value")
    for tok in text.split(":"):
        if tok in ("free", "pack", "scatter", "vscatter"):
            out["arrangement"] = tok
        elif tok in ("excl", "shared", "exclhost"):
            out["sharing"] = tok
        elif tok.startswith("group="):
            out["group"] = tok[6:]
        else:
            raise UsageError("qsub: illegal -l value")
    return out


def parse_l_option(value: str, into: dict, locked: set | None, cmdline: bool) -> None:
    """One -l value: 'a=b[,c=d]'.  Resources already set on the command line win over script
    directives (src/cmds/qsub.c process_opts(): 'option on the command line take precedence')."""
    for item in split_commas(value):
        if not item:
            continue
        if "=" not in item:
            raise UsageError("qsub: illegal -l value")
        k, v = item.split("=", 1)
        k, v = k.strip(), unquote(v.strip())
        if k not in JOB_WIDE_RES and k not in INT_CHUNK_RES | SIZE_CHUNK_RES | STR_CHUNK_RES:
            raise PbsError(PBSE_UNKRESC, f"Unknown resource: {k}")
        if locked is not None:
            if not cmdline and k in locked:
                continue
            if cmdline:
                locked.add(k)
        into[k] = v


def resolve_resources(rl_in: dict) -> tuple[list[dict], dict, dict]:
    """Turn the requested resources into (chunks, place, Resource_List strings)."""
    rl = dict(rl_in)
    if "nodes" in rl:
        # Old-style nodes=N[:ppn=P] is converted to select/place by PBS
        # (qsub.1B: do not mix old-style with select/place).
        if "select" in rl or "place" in rl:
            raise UsageError("qsub: illegal -l value")
        m = re.fullmatch(r"(\d+)(?::ppn=(\d+))?", rl.pop("nodes"))
        if not m:
            raise UsageError("qsub: illegal -l value")
        ppn = int(m.group(2) or 1)
        rl["select"] = f"{m.group(1)}:ncpus={ppn}:mpiprocs={ppn}"
        rl["place"] = "scatter"
    if "select" in rl:
        chunks = parse_select(rl["select"])
    else:
        # Job-wide ncpus/mem/ngpus without select become one chunk (default_chunk.ncpus=1).
        res: dict = {}
        for k in ("ncpus", "ngpus", "mpiprocs"):
            if k in rl:
                if not re.fullmatch(r"\d+", rl[k]):
                    raise PbsError(PBSE_BADATVAL,
                                   f"Illegal attribute or resource value Resource_List.{k}")
                res[k] = int(rl[k])
        if "mem" in rl:
            res["mem"] = parse_size(rl["mem"])
        chunks = [{"count": 1, "res": res}]
        rl["select"] = "1:ncpus=" + rl.get("ncpus", "1") + "".join(
            f":{k}={rl[k]}" for k in ("ngpus", "mem") if k in rl)
    for c in chunks:
        c["res"].setdefault("ncpus", 1)
        # pbs_resources.7B mpiprocs: default 1 when ncpus > 0, else 0.
        c["res"].setdefault("mpiprocs", 1 if c["res"]["ncpus"] > 0 else 0)
    place = parse_place(rl.get("place", "free"))
    rl.setdefault("place", "free")
    if "walltime" in rl:
        try:
            rl["walltime"] = fmt_duration(parse_duration(rl["walltime"]))
        except ValueError:
            raise PbsError(PBSE_BADATVAL,
                           "Illegal attribute or resource value Resource_List.walltime"
                           ) from None
    total = dict.fromkeys(("ncpus", "ngpus", "mpiprocs", "mem"), 0)
    nodect = 0
    for c in chunks:
        nodect += c["count"]
        for k in total:
            total[k] += c["count"] * c["res"].get(k, 0)
    rl["ncpus"] = str(total["ncpus"])
    rl["nodect"] = str(nodect)
    if total["ngpus"]:
        rl["ngpus"] = str(total["ngpus"])
    if any("mpiprocs" in c["res"] for c in chunks) and "mpiprocs" in rl_in.get("select", ""):
        rl["mpiprocs"] = str(total["mpiprocs"])
    if total["mem"]:
        rl["mem"] = fmt_size(total["mem"])
    return chunks, place, rl


# ---------------------------------------------------------------------------------------------
# Job model helpers.  A normal job is its own "unit"; an array parent keeps its started/ended
# subjobs in job['array']['subjobs'][str(index)] (queued subjobs are implied).
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# Processes.
# ---------------------------------------------------------------------------------------------


def proc_start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            data = f.read()
    except OSError:
        return None
    return data.rsplit(")", 1)[1].split()[19]


def pid_alive(pid: int | None, start: str | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now_start = proc_start_time(pid)
    if now_start is None:
        return True  # no /proc: trust kill(0)
    if start is not None and now_start != start:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except OSError:
        return False
    return True


def killpg(pgid: int | None, sig: int) -> bool:
    if not pgid:
        return False
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def spawn_detached(argv: list[str], env: dict, log_path: str) -> int:
    """Double-fork a detached process in its own session (so no zombie is left to the caller)
    and return its pid."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(r)
            os.setsid()
            pid2 = os.fork()
            if pid2:
                os.write(w, str(pid2).encode())
                os._exit(0)
            os.close(w)
            fd0 = os.open(os.devnull, os.O_RDONLY)
            fd1 = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(fd0, 0)
            os.dup2(fd1, 1)
            os.dup2(fd1, 2)
            os.execve(argv[0], argv, env)
        except BaseException:  # noqa: BLE001 - nothing sane to do in a forked child
            os._exit(127)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 64)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return int(data) if data else 0


# ---------------------------------------------------------------------------------------------
# Scheduling pass.
# ---------------------------------------------------------------------------------------------


def host_table(cfg: dict) -> list[dict]:
    hosts = []
    for h in cfg["hosts"]:
        hosts.append({"name": h["name"], "ncpus": int(h.get("ncpus", 0)),
                      "ngpus": int(h.get("ngpus", 0)),
                      "mem": parse_size(h["mem"]) if h.get("mem") else None})
    return hosts


def fits(res: dict, free: dict) -> str | None:
    """Return the first resource that does not fit, or None."""
    for k in ("ncpus", "ngpus"):
        if res.get(k, 0) > free[k]:
            return k
    if res.get("mem") and free["mem"] is not None and res["mem"] > free["mem"]:
        return "mem"
    return None


def try_place(chunks: list[dict], place: dict, free: dict, busy: set, exclusive: set,
              hosts: list[dict]) -> list[tuple[str, dict]] | None:
    """Greedy placement.  scatter/vscatter: one chunk per host (qsub.1B: 'Only one chunk with
    any MPI processes is taken from a host'); pack: all chunks from one host; free: any.
    excl/exclhost: the host(s) must have no other job and are not shared afterwards."""
    names = [h["name"] for h in hosts]
    inst = [c["res"] for c in chunks for _ in range(c["count"])]
    excl = place["sharing"] in ("excl", "exclhost")

    def usable(h: str) -> bool:
        if h in exclusive:
            return False
        return not (excl and h in busy)

    def pinned(res: dict, h: str) -> bool:
        want = res.get("host") or res.get("vnode")
        return want is None or want == h

    if place["arrangement"] == "pack":
        for h in names:
            if not usable(h):
                continue
            tot = {"ncpus": 0, "ngpus": 0, "mem": 0}
            for r in inst:
                for k in tot:
                    tot[k] += r.get(k, 0)
            if all(pinned(r, h) for r in inst) and fits(tot, free[h]) is None:
                return [(h, r) for r in inst]
        return None
    tentative = {h: dict(free[h]) for h in names}
    used: set = set()
    out = []
    for r in inst:
        for h in names:
            if not usable(h) or not pinned(r, h):
                continue
            if place["arrangement"] in ("scatter", "vscatter") and h in used:
                continue
            if fits(r, tentative[h]) is None:
                for k in ("ncpus", "ngpus"):
                    tentative[h][k] -= r.get(k, 0)
                if tentative[h]["mem"] is not None:
                    tentative[h]["mem"] -= r.get("mem", 0)
                used.add(h)
                out.append((h, r))
                break
        else:
            return None
    return out


def shortage_comment(chunks: list[dict], free: dict, hosts: list[dict], never: bool) -> str:
    """Scheduler comment on a job that cannot start, worded like the OpenPBS scheduler's
    ('Not Running: Insufficient amount of resource: ncpus (R: 8 A: 4 T: 8)', 'Can Never Run:
    ...', 'Not enough free nodes available', 'Not enough total nodes available')."""
    prefix = "Can Never Run" if never else "Not Running"
    kinds = [k for k in ("ncpus", "ngpus", "mem")
             if k != "mem" or all(h["mem"] is not None for h in hosts)]

    def fmt(k: str, n: int) -> str:
        return fmt_kb(n) if k == "mem" else str(n)

    # Whole-job amounts against the whole complex.
    for k in kinds:
        req = sum(c["count"] * c["res"].get(k, 0) for c in chunks)
        total = sum(h[k] for h in hosts)
        avail = sum(max(0, free[h["name"]][k]) for h in hosts)
        if req > total or (req > avail and not never):
            return (f"{prefix}: Insufficient amount of resource: {k} "
                    f"(R: {fmt(k, req)} A: {fmt(k, avail)} T: {fmt(k, total)})")
    # One chunk against the largest host.
    for c in chunks:
        for k in kinds:
            need = c["res"].get(k, 0)
            best_total = max(h[k] for h in hosts)
            best_free = max(max(0, free[h["name"]][k]) for h in hosts)
            if need > best_total or (need > best_free and not never):
                return (f"{prefix}: Insufficient amount of resource: {k} "
                        f"(R: {fmt(k, need)} A: {fmt(k, best_free)} T: {fmt(k, best_total)})")
    return f"{prefix}: Not enough {'total' if never else 'free'} nodes available"


def exec_strings(alloc: list[tuple[str, dict]]) -> tuple[str, str]:
    """exec_host 'host/N[*C]+...' (N = task slot on that host, '*C' omitted when C is 1) and
    exec_vnode '(host:ncpus=C[:ngpus=G][:mem=M])+...' (pbs_job_attributes.7B)."""
    slot: dict = {}
    hosts, vnodes = [], []
    for h, r in alloc:
        n = slot.get(h, 0)
        slot[h] = n + 1
        c = r.get("ncpus", 0)
        hosts.append(f"{h}/{n}" + (f"*{c}" if c != 1 else ""))
        parts = [f"ncpus={c}"]
        if r.get("ngpus"):
            parts.append(f"ngpus={r['ngpus']}")
        if r.get("mem"):
            parts.append(f"mem={fmt_kb(r['mem'])}")
        vnodes.append(f"({h}:" + ":".join(parts) + ")")
    return "+".join(hosts), "+".join(vnodes)


def schedule_pass(store: Store, now: float | None = None) -> None:
    """One scheduling cycle: reap lost runners, then start queued jobs that fit, in order
    Priority (higher first) then queue order (as changed by qorder.1B)."""
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
            alloc = try_place(chunks, place, free, busy, exclusive, hosts)
            if alloc is None:
                never = try_place(chunks, place, empty, set(), set(), hosts) is None
                comment = shortage_comment(chunks, free, hosts, never)
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
    argv = [sys.executable, LIB_PATH, "_runner", job["seq"], "" if index is None else str(index)]
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
    unit["substate"] = SUB_TERMINATED if unit.get("deleted") else SUB_FINISHED
    if status is not None:
        unit["exit_status"] = status
    unit["mtime"] = unit["obittime"] = unit["end"] = now
    unit["runner_pid"] = None
    store.dirty = True
    if index is not None:
        job["mtime"] = now
        refresh_array_state(job, now, store.cfg.get("job_history_enable", True))
    drop_if_no_history(store, job)


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
    env = {
        "HOME": job["home"], "USER": job["owner"], "LOGNAME": job["owner"],
        "SHELL": job.get("login_shell") or "/bin/bash",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
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
            # Deleted before it could start: nothing ran, no Exit_status.
            finish_unit(store, job, index, None, time.time())
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
    rc = None
    while rc is None:
        try:
            rc = proc.wait(timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            pass
        now = time.time()
        if walltime is not None and not wt_killed and now - start > walltime:
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
        if wt_killed:
            u["comment"] = (f"{base} and exceeded its walltime (job killed: walltime "
                            f"{math.ceil(end - start)} exceeded limit {walltime})")
        elif u.get("deleted"):
            u["comment"] = f"{base} and terminated"
        else:
            u["comment"] = f"{base} and finished"
        u["walltime_used"] = end - start
        finish_unit(store, j, index, status, end)
        schedule_pass(store)
    return 0


# ---------------------------------------------------------------------------------------------
# Rendering: attributes in the order qstat -f prints them.
# ---------------------------------------------------------------------------------------------


def std_path_attr(job: dict, which: str, index: int | None, jid: str) -> str:
    p = job["out_path"] if which == "o" else job["err_path"]
    if index is not None:
        p = p.replace("^array_index^", str(index))
    return f"{job['submit_host']}:{p}"


def job_attrs(store: Store, job: dict, index: int | None = None) -> list[tuple[str, object]]:
    """(name, value) pairs; a value is a str, or a list of (resource, str) for Resource_List,
    resources_used and Variable_List."""
    cfg = store.cfg
    now = time.time()
    is_parent = job.get("array") is not None and index is None
    if index is not None:
        unit = job["array"]["subjobs"].get(str(index)) or {
            "state": "Q", "substate": SUB_QUEUED}
    else:
        unit = job
    jid = job_id(cfg, job, index)
    state = unit["state"]
    a: list[tuple[str, object]] = [
        ("Job_Name", job["name"]),
        ("Job_Owner", f"{job['owner']}@{job['submit_host']}"),
    ]
    if unit.get("stime") and not is_parent and state in ("R", "E", "F", "X"):
        end = unit.get("end") or now
        a.append(("resources_used", [
            ("cpupercent", "0"), ("cput", "00:00:00"), ("mem", "0kb"),
            ("ncpus", job["rl"]["ncpus"]), ("vmem", "0kb"),
            ("walltime", fmt_duration(end - unit["stime"]))]))
    a += [("job_state", state), ("queue", job["queue"]), ("server", cfg["server"]),
          ("Account_Name", job.get("account")), ("Checkpoint", "u"),
          ("ctime", ctime_str(job["ctime"]))]
    a.append(("Error_Path", std_path_attr(job, "e", index, jid)))
    if unit.get("exec_host") and not is_parent:
        a.append(("exec_host", unit["exec_host"]))
        a.append(("exec_vnode", unit["exec_vnode"]))
    a += [("Hold_Types", job["hold"]), ("Join_Path", job.get("join", "n")),
          ("Keep_Files", job.get("keep", "n")), ("Mail_Points", job.get("mail", "a")),
          ("mtime", ctime_str(unit.get("mtime") or job["mtime"])),
          ("Output_Path", std_path_attr(job, "o", index, jid)),
          ("Priority", str(job.get("priority", 0))),
          ("qtime", ctime_str(job["qtime"])),
          ("Rerunable", "True" if job.get("rerunable", True) else "False"),
          ("Resource_List", [(k, job["rl"][k]) for k in sorted(job["rl"])])]
    if unit.get("stime"):
        a.append(("stime", ctime_str(unit["stime"])))
    if unit.get("obittime"):
        a.append(("obittime", ctime_str(unit["obittime"])))
    if unit.get("session_id") and not is_parent and state in ("R", "E"):
        a.append(("session_id", str(unit["session_id"])))
    if job.get("shell_path"):
        a.append(("Shell_Path_List", job["shell_path"]))
    a += [("jobdir", job["home"]), ("substate", str(unit.get("substate", SUB_QUEUED))),
          ("Variable_List", [(k, v) for k, v in job["variables"]])]
    if job.get("exec_time"):
        a.append(("Execution_Time", ctime_str(job["exec_time"])))
    if unit.get("comment"):
        a.append(("comment", unit["comment"]))
    elif index is not None and state == "Q" and job.get("comment", "").startswith("Not"):
        a.append(("comment", job["comment"]))
    a += [("etime", ctime_str(job["etime"])), ("eligible_time", "00:00:00")]
    if unit.get("run_count"):
        a.append(("run_count", str(unit["run_count"])))
    if is_parent:
        arr = job["array"]
        c = array_counts(job)
        a += [("array", "True"),
              ("array_state_count",
               f"Queued:{c['Queued']} Running:{c['Running']} Exiting:{c['Exiting']} "
               f"Expired:{c['Expired']} "),
              ("array_indices_submitted", arr["submitted"]),
              ("array_indices_remaining", fmt_ranges(queued_indices(job), arr["step"]))]
        if arr.get("max_run"):
            a.append(("max_run_subjobs", str(arr["max_run"])))
    if index is not None:
        a += [("array_id", job_id(cfg, job, None)), ("array_index", str(index))]
    if "exit_status" in unit and state in ("F", "X"):
        a.append(("Exit_status", str(unit["exit_status"])))
    a += [("Submit_arguments", job["submit_args"])]
    if state in ("F", "X"):
        a.append(("history_timestamp", str(int(unit.get("obittime") or now))))
    a += [("project", job.get("project", "_pbs_project_default")),
          ("Submit_Host", job["submit_host"])]
    return [(k, v) for k, v in a if v is not None]


# --- JSON (qstat -f -F json) ---
JSON_NUMBER = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")
LEADING_ZERO_DIGITS = re.compile(r"-?0\d+")


def json_scalar(value: str) -> str:
    """qstat's JSON writer prints a value that reads as a number without quotes.
    DELIBERATE DEFECT (openpbs/openpbs issue #1255): all-digit values with a leading zero
    (e.g. `qsub -v FOO=005`) are emitted unquoted too, so the output is NOT valid JSON
    ("FOO":005).  Parsers of qstat JSON must tolerate this; see README.md."""
    if JSON_NUMBER.fullmatch(value) or LEADING_ZERO_DIGITS.fullmatch(value):
        return value
    return json.dumps(value, ensure_ascii=False)


def render_json(store: Store, items: list[tuple[str, list]]) -> str:
    """qstat.1B -F json: 'Attribute output is preceded by timestamp, PBS version, and PBS
    server hostname'; jobs under "Jobs" (the key only appears once a job is printed)."""
    ind = "    "
    out = ["{", f'{ind}"timestamp":{int(time.time())},',
           f'{ind}"pbs_version":"{PBS_VERSION}",', f'{ind}"pbs_server":"{store.cfg["server"]}"']
    if items:
        out[-1] += ","
        out.append(f'{ind}"Jobs":{{')
        for n, (jid, attrs) in enumerate(items):
            out.append(f'{ind * 2}{json.dumps(jid)}:{{')
            for m, (k, v) in enumerate(attrs):
                tail = "," if m < len(attrs) - 1 else ""
                if isinstance(v, list):
                    out.append(f'{ind * 3}"{k}":{{')
                    for q, (rk, rv) in enumerate(v):
                        rt = "," if q < len(v) - 1 else ""
                        out.append(f"{ind * 4}{json.dumps(rk)}:{json_scalar(rv)}{rt}")
                    out.append(f"{ind * 3}}}{tail}")
                else:
                    out.append(f'{ind * 3}"{k}":{json_scalar(v)}{tail}')
            out.append(f"{ind * 2}}}" + ("," if n < len(items) - 1 else ""))
        out.append(f"{ind}}}")
    out.append("}")
    return "\n".join(out)


# --- qstat -f plain text ---


def escape_var(v: str) -> str:
    return v.replace(",", "\\,")


def flat_attrs(attrs: list[tuple[str, object]]) -> list[tuple[str, str]]:
    flat: list[tuple[str, str]] = []
    for k, v in attrs:
        if k == "Variable_List":
            flat.append((k, ",".join(f"{vk}={escape_var(vv)}" for vk, vv in v)))  # type: ignore
        elif isinstance(v, list):
            flat += [(f"{k}.{rk}", rv) for rk, rv in v]
        else:
            flat.append((k, str(v)))
    return flat


def wrap_line(line: str, wide: bool) -> str:
    """qstat -f folds long values onto continuation lines that start with a tab (after a comma
    where possible); -w prints 'each attribute on one unbroken line' (qstat.1B -f [-w])."""
    if wide or len(line) <= 78:
        return line
    out, cur = [], line
    limit = 78
    while len(cur) > limit:
        cut = cur.rfind(",", 0, limit)
        if cut <= 0:
            cut = limit - 1
        out.append(cur[:cut + 1])
        cur = "\t" + cur[cut + 1:]
        limit = 71
    out.append(cur)
    return "\n".join(out)


def render_full(items: list[tuple[str, list]], wide: bool) -> str:
    blocks = []
    for jid, attrs in items:
        lines = [f"Job Id: {jid}"]
        lines += [wrap_line(f"    {k} = {v}", wide) for k, v in flat_attrs(attrs)]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def render_dsv(items: list[tuple[str, list]], delim: str) -> str:
    def esc(s: str) -> str:
        return s.replace("\n", "\\n").replace("\f", "\\f").replace(delim, "\\" + delim)

    rows = []
    for jid, attrs in items:
        rows.append(delim.join([f"Job Id:{esc(jid)}"] +
                               [f"{k}={esc(v)}" for k, v in flat_attrs(attrs)]))
    return "\n".join(rows)


def render_table(store: Store, rows: list[tuple[str, dict, int | None]], wide: bool) -> str:
    """qstat.1B 'Job Status in Default Format': Job ID, Name, User, Time Use, S, Queue; too
    long values are truncated with '*' in the last position."""
    w = (30, 15, 15) if wide else (16, 16, 16)

    def cut(s: str, n: int) -> str:
        return s if len(s) <= n else s[: n - 1] + "*"

    out = [f"{'Job id':<{w[0]}}  {'Name':<{w[1]}} {'User':<{w[2]}}  Time Use S Queue",
           f"{'-' * w[0]}  {'-' * w[1]} {'-' * w[2]}  -------- - -----"]
    for jid, job, index in rows:
        unit = job if index is None else job["array"]["subjobs"].get(str(index), {"state": "Q"})
        state = unit["state"]
        tuse = "00:00:00" if unit.get("stime") and (index is not None or not job.get("array")) \
            else "0"
        out.append(f"{cut(jid, w[0]):<{w[0]}}  {cut(job['name'], w[1]):<{w[1]}} "
                   f"{cut(job['owner'], w[2]):<{w[2]}}  {tuse:>8} {state} "
                   f"{cut(job['queue'], w[1])}")
    return "\n".join(out)


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


# ---------------------------------------------------------------------------------------------
# qsub
# ---------------------------------------------------------------------------------------------
QSUB_USAGE = """usage: qsub [-a date_time] [-A account_string] [-c interval]
\t[-C directive_prefix] [-e path] [-f ] [-h ] [-I [-X]] [-j oe|eo] [-J X-Y[:Z]]
\t[-k o|e|oe] [-l resource_list] [-m mail_options] [-M user_list]
\t[-N jobname] [-o path] [-p priority] [-P project] [-q queue] [-r y|n]
\t[-R o|e|oe] [-S path] [-u user_list] [-W otherattributes=value...]
\t[-v variable_list] [-V ] [-z] [script | -- command [arg1 ...]]
       qsub --version"""

QSUB_SPEC = "a:A:c:C:e:fhIj:J:k:l:m:M:N:o:p:q:r:R:S:u:v:VW:XzP:"
CMDLINE, SCRIPT = 3, 2  # src/cmds/qsub.c: CMDLINE, CMDLINE-1 for job script directives


class QsubOptions:
    def __init__(self) -> None:
        self.set_by: dict = {}  # option letter -> pass that set it
        self.vals: dict = {}
        self.resources: dict = {}
        self.res_locked: set = set()
        self.w: dict = {}
        self.w_locked: set = set()
        self.roptarg = "y"
        self.j_opt = False
        self.server_error: PbsError | None = None

    def take(self, c: str, passet: int) -> bool:
        """if_cmd_line(): set only when not already set by a higher-priority pass."""
        if self.set_by.get(c, 0) > passet:
            return False
        self.set_by[c] = passet
        return True


def qsub_process(opts: QsubOptions, pairs: list[tuple[str, str]], passet: int) -> list[str]:
    """src/cmds/qsub.c process_opts(); returns error lines (each makes errflg non-zero)."""
    errs: list[str] = []
    for c, v in pairs:
        if c == "l":
            try:
                parse_l_option(v, opts.resources, opts.res_locked, passet == CMDLINE)
            except UsageError:
                errs.append("qsub: illegal -l value")
            except PbsError as e:  # rejected by the server at submission
                opts.server_error = opts.server_error or e
            continue
        if c == "W":
            v = v.strip()
            if not v:
                errs.append("qsub: illegal -W value")
                continue
            for item in split_commas(v):
                if "=" not in item:
                    errs.append("qsub: illegal -W value")
                    break
                k, wv = item.split("=", 1)
                k = k.strip()
                if passet != CMDLINE and k in opts.w_locked:
                    continue
                if passet == CMDLINE:
                    opts.w_locked.add(k)
                opts.w[k] = unquote(wv.strip())
            continue
        if c == "J":
            # qsub.c: "qsub:  cannot submit non-rerunable Array Job" when -r n came first.
            if opts.roptarg != "y":
                errs.append("qsub:  cannot submit non-rerunable Array Job")
                continue
            if opts.take("J", passet):
                opts.j_opt = True
                opts.vals["J"] = v
            continue
        if c == "r":
            if opts.take("r", passet):
                if v not in ("y", "n"):
                    errs.append("qsub: illegal -r value")
                    continue
                if v == "n" and opts.j_opt:
                    errs.append("qsub:  cannot submit non-rerunable Array Job")
                    continue
                opts.roptarg = v
                opts.vals["r"] = v
            continue
        if c == "I":
            errs.append("qsub: interactive jobs (-I) are not supported by pbsdouble")
            continue
        if c == "X":
            errs.append("qsub: X11 Forwarding possible only for interactive jobs")
            continue
        if opts.take(c, passet):
            opts.vals[c] = v
    return errs


def read_directives(lines: list[str], prefix: str) -> list[str]:
    """Directive lines, scanned until the first executable line (src/cmds/qsub.c get_script():
    directives are honoured while '!exec'; pbs_isexecutable() is false for blank lines, lines
    starting with ':' and comment lines).  A trailing backslash continues a directive."""
    found = []
    i = 0
    while i < len(lines):
        s = lines[i]
        stripped = s.lstrip()
        if prefix and stripped.startswith(prefix):
            text = stripped[len(prefix):]
            while text.rstrip("\n").endswith("\\") and i + 1 < len(lines):
                text = text.rstrip("\n")[:-1] + lines[i + 1]
                i += 1
            found.append(text.strip())
        elif s.startswith(":") or not stripped or stripped.startswith("#"):
            pass
        else:
            break
        i += 1
    return found


def parse_exec_time(text: str) -> float:
    """qsub.1B -a [[[[CC]YY]MM]DD]hhmm[.SS]."""
    m = re.fullmatch(r"(\d{4,12})(?:\.(\d\d))?", text)
    if not m or len(m.group(1)) % 2:
        raise ValueError(text)
    digits = m.group(1)
    lt = time.localtime()
    fields = {"Y": lt.tm_year, "M": lt.tm_mon, "D": lt.tm_mday}
    mm, hh = int(digits[-2:]), int(digits[-4:-2])
    rest = digits[:-4]
    if len(rest) >= 2:
        fields["D"] = int(rest[-2:])
    if len(rest) >= 4:
        fields["M"] = int(rest[-4:-2])
    if len(rest) == 6:
        fields["Y"] = 2000 + int(rest[:2])
    if len(rest) == 8:
        fields["Y"] = int(rest[:4])
    t = time.mktime((fields["Y"], fields["M"], fields["D"], hh, mm, int(m.group(2) or 0),
                     0, 0, -1))
    if t < time.time() and len(rest) == 0:
        t += 86400  # "If a specified portion has already passed, the next-larger portion is
        # set to one after the current date."
    return t


def build_variables(opts: QsubOptions, cwd: str, queue: str, host: str) -> list[list[str]]:
    """Variable_List: PBS_O_* from the submission environment (qsub.1B ENVIRONMENT
    VARIABLES), then -V (the whole environment) or -v (named variables)."""
    env = os.environ
    out: list[list[str]] = []
    for name, var in (("PBS_O_HOME", "HOME"), ("PBS_O_LANG", "LANG"),
                      ("PBS_O_LOGNAME", "LOGNAME"), ("PBS_O_PATH", "PATH"),
                      ("PBS_O_MAIL", "MAIL"), ("PBS_O_SHELL", "SHELL")):
        if var in env:
            out.append([name, env[var]])
        elif var == "LOGNAME":
            out.append([name, current_user()])
    out.append(["PBS_O_WORKDIR", cwd])
    out.append(["PBS_O_SYSTEM", os.uname().sysname])
    extra: list[list[str]] = []
    if "V" in opts.vals:
        extra += [[k, v] for k, v in env.items() if not k.startswith("PBS_O_")]
    if "v" in opts.vals:
        for item in split_commas(opts.vals["v"]):
            item = item.strip()
            if not item:
                continue
            if "=" in item:
                k, v = item.split("=", 1)
                extra.append([k.strip(), unquote(v)])
            elif not item.startswith("PBS_O_"):
                if item not in env:
                    raise UsageError("qsub: cannot send environment with the job")
                extra.append([item, env[item]])
    seen = {k for k, _ in out}
    for k, v in extra:
        if k in seen:
            out = [[a, b] if a != k else [a, v] for a, b in out]
        else:
            out.append([k, v])
            seen.add(k)
    out.append(["PBS_O_QUEUE", queue])
    out.append(["PBS_O_HOST", host])
    return out


def qsub_main(argv: list[str]) -> int:
    if argv == ["--version"]:
        print(f"pbs_version = {PBS_VERSION}")  # qsub.1B --version
        return 0
    home = double_home("qsub")
    cfg = load_config(home)
    try:
        pairs, operands, ddash = getopt("qsub", argv, QSUB_SPEC)
    except UsageError as e:
        eprint(str(e))
        eprint(QSUB_USAGE)
        return 2
    opts = QsubOptions()
    errs = qsub_process(opts, pairs, CMDLINE)
    # qsub.1B OPERANDS: a script must be the last argument; after "--" an executable and args.
    if not ddash and len(operands) > 1:
        errs.append("")
    if ddash and not operands:
        errs.append("")
    if errs:
        for e in errs:
            if e:
                eprint(e)
        eprint(QSUB_USAGE)
        return 2
    cwd = os.getcwd()
    script_text = None
    executable = None
    arguments: list[str] = []
    if ddash:
        executable, arguments = operands[0], operands[1:]
        name = "STDIN"
    elif operands and operands[0] != "-":
        path = operands[0]
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                script_text = f.read()
        except OSError as exc:
            eprint(f"qsub: script file:: {exc.strerror}")
            return 1
        name = os.path.basename(path)
    else:
        script_text = sys.stdin.read()
        name = "STDIN"
    if script_text is not None:
        # qsub.1B -C: "Overrides the PBS_DPREFIX environment variable and the default" (#PBS).
        prefix = opts.vals.get("C", os.environ.get("PBS_DPREFIX", "#PBS"))
        for d in read_directives(script_text.splitlines(keepends=True), prefix):
            try:
                dpairs, dops, _ = getopt("qsub", make_argv(d), QSUB_SPEC)
                derrs = qsub_process(opts, dpairs, SCRIPT)
                if dops:
                    derrs.append("extra operand")
            except (UsageError, PbsError) as e:
                derrs = [str(e)]
            if derrs:
                for e in derrs:
                    if e.startswith("qsub:"):
                        eprint(e)
                # src/cmds/qsub.c do_dir(): "qsub: directive error: <args>"
                eprint(f"qsub: directive error: {' '.join(make_argv(d))} ")
                return 1
    try:
        if opts.server_error is not None:
            raise opts.server_error
        job = qsub_build(cfg, opts, cwd, name, script_text, executable, arguments, argv)
    except UsageError as e:
        if str(e):
            eprint(str(e))
        if "cannot send environment" in str(e):
            return 1
        eprint(QSUB_USAGE)
        return 2
    except PbsError as e:
        eprint(f"qsub: {e.text}")
        return exit_code(e.code)
    with Store(home, cfg) as store:
        seq = str(store.st["next_seq"])
        store.st["next_seq"] += 1
        job["seq"] = seq
        job["out_path"] = job["out_path"].replace("<seq>", seq)
        job["err_path"] = job["err_path"].replace("<seq>", seq)
        if script_text is not None:
            spool = os.path.join(home, "spool")
            os.makedirs(spool, exist_ok=True)
            sp = os.path.join(spool, f"{seq}.SC")
            with open(sp, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(script_text)
            os.chmod(sp, 0o700)
            job["script"] = sp
        store.jobs[seq] = job
        store.st["order"].append(seq)
        store.dirty = True
        jid = job_id(cfg, job)
        schedule_pass(store)
    if "z" not in opts.vals:
        print(jid)  # qsub.1B STANDARD OUTPUT: the job identifier
    if opts.w.get("block", "").lower() == "true":
        return qsub_block(home, cfg, seq)
    return 0


def qsub_block(home: str, cfg: dict, seq: str) -> int:
    # qsub.1B -W block=true: "qsub waits for the job to terminate, then returns the job's exit
    # value"; 3 "If the job is deleted without being run".
    while True:
        with Store(home, cfg) as store:
            job = store.jobs.get(seq)
            if job is None:
                return 0
            if job["state"] == "F":
                if "exit_status" not in job:
                    return 3
                return exit_code(int(job["exit_status"]))
        time.sleep(0.2)


def qsub_build(cfg: dict, opts: QsubOptions, cwd: str, name: str, script_text: str | None,
               executable: str | None, arguments: list[str], argv: list[str]) -> dict:
    v = opts.vals
    import socket

    user = current_user()
    host = socket.gethostname()
    now = time.time()
    if "N" in v:
        name = v["N"]
        # qsub.1B -N / pbs_job_attributes.7B Job_Name: alphanumeric first, printable
        # non-white-space characters, up to 236 characters.
        if not re.fullmatch(r"[A-Za-z0-9][^\s]{0,235}", name):
            raise UsageError("qsub: illegal -N value")
    queue = parse_destination(v["q"], cfg) if "q" in v else cfg["default_queue"]
    queue_check(cfg, queue, user)
    prio = 0
    if "p" in v:
        try:
            prio = int(v["p"].strip())
        except ValueError:
            raise UsageError("qsub: illegal -p value") from None
        if not -1024 <= prio <= 1023:  # qsub.1B -p: Range [-1024, +1023] inclusive
            raise UsageError("qsub: illegal -p value")
    join = v.get("j", "n")
    if join not in ("oe", "eo", "n"):
        raise UsageError("qsub: illegal -j value")
    chunks, place, rl = resolve_resources(opts.resources)
    array = None
    if "J" in v:
        m = re.fullmatch(r"(\d+)-(\d+)(?::(\d+))?(?:%(\d+))?", v["J"].strip())
        if not m or int(m.group(1)) > int(m.group(2)) or (m.group(3) and int(m.group(3)) < 1):
            raise UsageError("qsub: illegal -J value")
        x, y, z = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
        indices = list(range(x, y + 1, z))
        # pbs_server_attributes.7B max_array_size; qsub prints "qsub: Array job exceeds server
        # or queue size limit" (PBSE_MaxArraySize).
        qmax = (cfg["queues"][queue] or {}).get("max_array_size")
        limit = min(int(cfg.get("max_array_size", 10000)), int(qmax or 1 << 30))
        if len(indices) > limit:
            raise PbsError(PBSE_MAXARRAYSIZE)
        array = {"indices": indices, "step": z,
                 "submitted": f"{x}-{y}" + (f":{z}" if z != 1 else ""),
                 "max_run": int(m.group(4)) if m.group(4) else None, "subjobs": {}}
    # Default output paths: <Job_Name>.o<seq> in qsub's cwd; for arrays the subjob index is
    # appended via ^array_index^ (PBS_FILE_ARRAY_INDEX_TAG, src/include/job.h).
    suffix = ".^array_index^" if array is not None else ""

    def path_opt(letter: str) -> str:
        if letter in v:
            p = v[letter]
            if ":" in p and not p.startswith("/"):
                hostpart, p = p.split(":", 1)
                base = os.environ.get("HOME", "/") if not p.startswith("/") else ""
                return os.path.join(base, p) if base else p
            return os.path.normpath(os.path.join(cwd, p)) + ("/" if p.endswith("/") else "")
        return os.path.join(cwd, f"{name}.{letter}<seq>{suffix}")

    hold = "u" if "h" in v else "n"
    variables = build_variables(opts, cwd, queue, host)
    job = {
        "seq": None, "name": name, "owner": user, "submit_host": host, "queue": queue,
        "state": "Q", "substate": SUB_QUEUED, "hold": hold, "priority": prio,
        "rerunable": v.get("r", "y") == "y" or array is not None,
        "account": v.get("A"), "join": join, "keep": v.get("k", "n"),
        "mail": v.get("m", "a"), "project": v.get("P", "_pbs_project_default"),
        "out_path": path_opt("o"), "err_path": path_opt("e"),
        "chunks": chunks, "place": place, "rl": rl, "resources": dict(opts.resources),
        "variables": variables, "home": os.environ.get("HOME") or pwd.getpwuid(
            os.getuid()).pw_dir,
        "login_shell": pwd.getpwuid(os.getuid()).pw_shell,
        "ctime": now, "qtime": now, "mtime": now, "etime": now,
        "workdir": cwd, "submit_args": " ".join(argv), "array": array, "w": opts.w,
        "shell_path": v.get("S"), "umask": opts.w.get("umask", "077"),
        "executable": executable, "arguments": arguments,
        "shebang": bool(script_text and script_text.startswith("#!")),
    }
    if "a" in v:
        try:
            job["exec_time"] = parse_exec_time(v["a"])
        except ValueError:
            raise UsageError("qsub: illegal -a value") from None
        if job["exec_time"] > now:
            job["state"], job["substate"] = "W", SUB_WAITING
    if hold != "n" and job["state"] == "Q":
        job["state"], job["substate"] = "H", SUB_HELD
    return job


# ---------------------------------------------------------------------------------------------
# qstat
# ---------------------------------------------------------------------------------------------
QSTAT_USAGE = """usage: 
qstat [-f] [-J] [-p] [-t] [-x] [-E] [-F format] [-D delim] [ job_identifier... | destination... ]
qstat [-a|-i|-r|-H|-T] [-J] [-t] [-u user] [-n] [-s] [-G|-M] [-1] [-w] [job_identifier... | destination...]
qstat -Q [-f] [-F format] [-D delim] [ destination... ]
qstat -q [-G|-M] [ destination... ]
qstat -B [-f] [-F format] [-D delim] [ server_name... ]
qstat --version"""  # noqa: W291, E501


def qstat_main(argv: list[str]) -> int:
    if argv == ["--version"]:
        print(f"pbs_version = {PBS_VERSION}")
        return 0
    home = double_home("qstat")
    cfg = load_config(home)
    try:
        pairs, operands, _ = getopt("qstat", argv, "fF:D:xtJwEpu:aiHnrsTQqBGM1")
    except UsageError as e:
        eprint(str(e))
        eprint(QSTAT_USAGE)
        return 2
    flags = {c for c, _ in pairs}
    fmt = dict(pairs).get("F")
    delim = dict(pairs).get("D", "|")
    unsupported = flags & set("aiHnrsTQqBGM1p")
    if unsupported:
        eprint(f"qstat: pbsdouble does not implement -{''.join(sorted(unsupported))}")
        return 2
    if fmt is not None and (fmt.lower() not in ("json", "dsv") or "f" not in flags):
        eprint(QSTAT_USAGE)
        return 2
    users = set(dict(pairs)["u"].split(",")) if "u" in flags else None
    history = "x" in flags
    subjobs = "t" in flags
    rc = 0
    items: list[tuple[str, dict, int | None]] = []
    with Store(home, cfg) as store:
        schedule_pass(store)

        def add_job(job: dict, explicit: bool) -> None:
            # qstat.1B: -J "Prints status information for job arrays (not subjobs)"; -t
            # "Displays status information for jobs, job arrays, and subjobs. When used with
            # -J option, prints status information for subjobs only."
            is_array = job.get("array") is not None
            if "J" in flags and not is_array and not explicit:
                return
            if not ("J" in flags and subjobs and is_array):
                items.append((job_id(cfg, job), job, None))
            if is_array and subjobs:
                for i in job["array"]["indices"]:
                    items.append((job_id(cfg, job, i), job, i))

        if not operands:
            for job in ordered_jobs(store):
                if job["state"] == "F" and not history:
                    continue
                if users and job["owner"] not in users:
                    continue
                add_job(job, False)
        for text in operands:
            if not ID_RE.match(text):
                q = text.split("@", 1)[0]
                if q and q not in cfg["queues"]:
                    eprint(f"qstat: Unknown queue destination {text}")
                    rc = exit_code(PBSE_UNKQUE)
                    continue
                for job in ordered_jobs(store):
                    if (q and job["queue"] != q) or (job["state"] == "F" and not history):
                        continue
                    add_job(job, False)
                continue
            try:
                r = resolve(store, text)
            except PbsError as e:
                try:
                    full = JobRef(text, cfg["server"]).full
                except ValueError:
                    full = text
                rc = report("qstat", e, full)
                continue
            job = r.job
            if job["state"] == "F" and not history:
                # "qstat: <id> Job has finished, use -x or -H to obtain historical job
                # information" (PBSE_HISTJOBID, exit 15139 & 0xff = 35).
                eprint(f"qstat: {r.ref.full} Job has finished, use -x or -H to obtain "
                       "historical job information")
                rc = exit_code(PBSE_HISTJOBID)
                continue
            if r.ref.is_sub:
                for i in r.ref.indices():
                    if i in job["array"]["indices"]:
                        items.append((job_id(cfg, job, i), job, i))
            else:
                add_job(job, True)
        if "E" in flags:
            items.sort(key=lambda t: (int(t[1]["seq"]), -1 if t[2] is None else t[2]))
        if "f" in flags:
            rendered = [(jid, job_attrs(store, job, i)) for jid, job, i in items]
            if fmt and fmt.lower() == "json":
                print(render_json(store, rendered))
            elif fmt and fmt.lower() == "dsv":
                out = render_dsv(rendered, delim)
                if out:
                    print(out)
            elif rendered:
                print(render_full(rendered, "w" in flags))
        elif items:
            print(render_table(store, items, "w" in flags))
    return rc


# ---------------------------------------------------------------------------------------------
# qdel
# ---------------------------------------------------------------------------------------------


def _kill_unit(unit: dict, force: bool) -> None:
    unit["kill_requested"] = True
    unit["deleted"] = True
    if unit["state"] == "R":
        unit["state"], unit["substate"] = "E", SUB_EXITING
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
            if job["state"] == "E" and not force:
                raise PbsError(PBSE_BADSTATE)
            if job["state"] in ("R", "E"):
                _kill_unit(job, force)
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
                    _kill_unit(sub, force)
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
                _kill_unit(sub, force)
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


# ---------------------------------------------------------------------------------------------
# qmgr (read-only: list/print server and queues; qmgr.8B)
# ---------------------------------------------------------------------------------------------


def _server_attrs(store: Store) -> list[tuple[str, str]]:
    cfg = store.cfg
    counts = {"Transit": 0, "Queued": 0, "Held": 0, "Waiting": 0, "Running": 0, "Exiting": 0,
              "Begun": 0}
    names = {"Q": "Queued", "H": "Held", "W": "Waiting", "R": "Running", "E": "Exiting",
             "B": "Begun"}
    total = 0
    for j in store.jobs.values():
        if j["state"] in names:
            counts[names[j["state"]]] += 1
            total += 1
    sc = " ".join(f"{k}:{v}" for k, v in counts.items()) + " "
    ncpus = sum(int(h.get("ncpus", 0)) for h in cfg["hosts"])
    used = sum(r.get("ncpus", 0) for _j, _i, u in active_units(store)
               for _h, r in u.get("alloc") or [])
    return [
        ("server_state", "Active"), ("server_host", cfg["server"]), ("scheduling", "True"),
        ("total_jobs", str(total)), ("state_count", sc),
        ("default_queue", cfg["default_queue"]), ("log_events", "511"),
        ("mail_from", "adm"), ("query_other_jobs", "True"),
        ("resources_available.ncpus", str(ncpus)),
        ("resources_default.ncpus", "1"), ("default_chunk.ncpus", "1"),
        ("resources_assigned.ncpus", str(used)),
        ("resources_assigned.nodect", str(sum(1 for _ in active_units(store)))),
        ("scheduler_iteration", "600"), ("flatuid", "True"),
        ("resv_enable", "True"), ("node_fail_requeue", "310"),
        ("max_array_size", str(cfg.get("max_array_size", 10000))),
        ("default_qsub_arguments", None),
        ("pbs_license_min", "0"), ("pbs_license_max", "2147483647"),
        ("pbs_license_linger_time", "31536000"), ("license_count", "Avail_Global:1000000 "
                                                  "Avail_Local:1000000 Used:0 High_Use:0"),
        ("pbs_version", PBS_VERSION), ("eligible_time_enable", "False"),
        ("job_history_enable", "True" if cfg.get("job_history_enable", True) else "False"),
        ("max_concurrent_provision", "5"), ("power_provisioning", "False"),
    ]


def _queue_attrs(store: Store, name: str) -> list[tuple[str, str]]:
    q = store.cfg["queues"][name] or {}
    counts = {"Transit": 0, "Queued": 0, "Held": 0, "Waiting": 0, "Running": 0, "Exiting": 0,
              "Begun": 0}
    names = {"Q": "Queued", "H": "Held", "W": "Waiting", "R": "Running", "E": "Exiting",
             "B": "Begun"}
    total = 0
    for j in store.jobs.values():
        if j["queue"] == name and j["state"] in names:
            counts[names[j["state"]]] += 1
            total += 1
    out = [("queue_type", "Execution"), ("total_jobs", str(total)),
           ("state_count", " ".join(f"{k}:{v}" for k, v in counts.items()) + " ")]
    if q.get("acl_users") is not None:
        out += [("acl_user_enable", "True"), ("acl_users", ",".join(q["acl_users"]))]
    if q.get("max_array_size"):
        out.append(("max_array_size", str(q["max_array_size"])))
    out.append(("kill_delay", str(q.get("kill_delay", store.cfg.get("kill_delay", 2)))))
    out += [("enabled", "True"), ("started", "True")]
    return out


def qmgr_main(argv: list[str]) -> int:
    usage = ("usage: qmgr [-a] [-c command] [-e] [-n] [-z] [server...]\n"
             "       qmgr --version")
    if argv == ["--version"]:
        print(f"pbs_version = {PBS_VERSION}")
        return 0
    try:
        pairs, _servers, _ = getopt("qmgr", argv, "ac:enz")
    except UsageError as e:
        eprint(str(e))
        eprint(usage)
        return 2
    commands = [v for c, v in pairs if c == "c"]
    if not commands:
        eprint("qmgr: pbsdouble supports only 'qmgr -c <command>'")
        return 2
    home = double_home("qmgr")
    cfg = load_config(home)
    rc = 0
    with Store(home, cfg) as store:
        schedule_pass(store)
        for command in commands:
            words = command.split()
            if not words:
                continue
            verb = words[0].lower()
            obj = words[1].lower() if len(words) > 1 else ""
            names = [n for n in " ".join(words[2:]).replace(",", " ").split() if n]
            is_list = "list".startswith(verb)
            is_print = "print".startswith(verb) and verb.startswith("p")
            if not (is_list or is_print) or not obj:
                # Everything else (set/create/delete/...) needs Manager privilege.
                eprint(f"qmgr obj= svr=default: {MESSAGES[PBSE_PERM]}")
                eprint(f"qmgr: Error ({PBSE_PERM}) returned from server")
                rc = exit_code(PBSE_PERM)
                continue
            if "server".startswith(obj):
                attrs = [(k, v) for k, v in _server_attrs(store) if v is not None]
                wanted = [n for n in names if n != cfg["server"]]
                if wanted:
                    attrs = [(k, v) for k, v in attrs if k in wanted]
                if is_list:
                    print(f"Server {cfg['server']}")
                    for k, v in attrs:
                        print(f"    {k} = {v}")
                    print()
                else:
                    print(_print_server(store))
            elif "queue".startswith(obj):
                qnames = names or list(cfg["queues"])
                for qn in qnames:
                    if qn not in cfg["queues"]:
                        eprint(f"qmgr obj={qn} svr=default: Unknown queue")
                        eprint(f"qmgr: Error ({PBSE_UNKQUE}) returned from server")
                        rc = exit_code(PBSE_UNKQUE)
                        continue
                    if is_list:
                        print(f"Queue {qn}")
                        for k, v in _queue_attrs(store, qn):
                            print(f"    {k} = {v}")
                        print()
                    else:
                        print(_print_queue(store, qn), end="")
            else:
                eprint(f"qmgr: pbsdouble does not implement '{command}'")
                rc = 2
    return rc


_READONLY_QUEUE_ATTRS = {"total_jobs", "state_count"}
_READONLY_SERVER_ATTRS = {"server_state", "server_host", "total_jobs", "state_count",
                          "resources_assigned.ncpus", "resources_assigned.nodect",
                          "license_count", "pbs_version"}


def _print_queue(store: Store, name: str) -> str:
    lines = ["#", f"# Create and define queue {name}", "#", f"create queue {name}"]
    for k, v in _queue_attrs(store, name):
        if k not in _READONLY_QUEUE_ATTRS:
            lines.append(f"set queue {name} {k} = {v}")
    return "\n".join(lines) + "\n"


def _print_server(store: Store) -> str:
    """qmgr.8B 'print server': the commands that would recreate the configuration."""
    lines = ["#", "# Create queues and set their attributes.", "#"]
    text = "\n".join(lines) + "\n"
    for qn in store.cfg["queues"]:
        text += _print_queue(store, qn)
    text += "#\n# Set server attributes.\n#\n"
    for k, v in _server_attrs(store):
        if v is not None and k not in _READONLY_SERVER_ATTRS:
            text += f"set server {k} = {v}\n"
    return text.rstrip("\n")


# ---------------------------------------------------------------------------------------------
# pbsdsh (pbsdsh.1B, src/cmds/pbsdsh.c)
# ---------------------------------------------------------------------------------------------


def pbsdsh_main(argv: list[str]) -> int:
    me = sys.argv[0] if sys.argv and sys.argv[0] else "pbsdsh"

    def usage() -> int:
        eprint(f"Usage: {me} [-c copies][-s][-v][-o] -- program [args...]")
        eprint(f"       {me} [-n node_index][-s][-v][-o] -- program [args...]")
        eprint(f"       {me} --version")
        eprint('Where -c copies =  run a copy of "program" on the first "copies" nodes,')
        eprint('      -n node_index = run a copy of "program" on the "node_index"-th node,')
        eprint("      -s = forces synchronous execution,")
        eprint("      -v = forces verbose output.")
        eprint("      -o = no obits are waited for.")
        eprint("      -u = (pbsdouble/Torque extension) one copy per unique host.")
        return 1

    if argv == ["--version"]:
        print(f"pbs_version = {PBS_VERSION}")
        return 0
    try:
        pairs, prog, _ = getopt("pbsdsh", argv, "c:n:svou")
    except UsageError as e:
        eprint(str(e))
        return usage()
    o = dict(pairs)
    flags = {c for c, _ in pairs}
    try:
        copies = int(o["c"]) if "c" in o else -1
        onenode = int(o["n"]) if "n" in o else -1
    except ValueError:
        return usage()
    if copies < -1 or onenode < -1 or ("c" in o and "n" in o) or not prog:
        return usage()
    if not os.environ.get("PBS_ENVIRONMENT"):
        eprint(f"{me}: not executing under PBS")  # src/cmds/pbsdsh.c
        return 1
    nodefile = os.environ.get("PBS_NODEFILE")
    jobid = os.environ.get("PBS_JOBID")
    if not nodefile or not jobid or not os.path.exists(nodefile):
        eprint(f"{me}: tm_init failed, rc = TM_ESYSTEM (17000)")
        return 1
    with open(nodefile, encoding="utf-8") as f:
        nodes = [ln.strip() for ln in f if ln.strip()]
    if not nodes:
        eprint(f"{me}: tm_nodeinfo failed, rc = TM_ESYSTEM (17000)")
        return 1
    # pbsdsh.c: one task per node-file line; -c copies wraps around; -n picks one logical
    # node (modulo the node count).
    if onenode >= 0:
        targets = [onenode % len(nodes)]
    elif copies >= 0:
        targets = [c % len(nodes) for c in range(copies)]
    elif "u" in flags:
        seen: dict = {}
        for i, h in enumerate(nodes):
            seen.setdefault(h, i)
        targets = list(seen.values())
    else:
        targets = list(range(len(nodes)))
    home = os.environ.get("PBS_DOUBLE_HOME", "")
    base = dict(os.environ)
    envfile = os.path.join(home, "aux", f"{jobid}.env.json") if home else ""
    if envfile and os.path.exists(envfile):
        # TM tasks get the job's environment from the MoM, not the caller's shell.
        with open(envfile, encoding="utf-8") as f:
            base = json.load(f)
    import subprocess

    verbose = "v" in flags
    fail_exit = bool(load_config(home).get("pbsdsh_fail_exit")) if home else False
    procs: list = []
    statuses: list[int] = []

    def finish(c: int, p) -> None:
        rc = p.wait()
        status = 256 + (-rc) if rc < 0 else rc
        statuses.append(status)
        if verbose or status != 0:
            print(f"{me}: task 0x{c:08X} exit status {status}", flush=True)

    for c, nd in enumerate(targets):
        env = dict(base)
        env.update({"PBS_TASKNUM": str(c + 2), "PBS_NODENUM": str(nd),
                    "PBS_VNODENUM": str(nd), "PBS_DOUBLE_HOST": nodes[nd]})
        try:
            p = subprocess.Popen(prog, env=env, cwd=env.get("HOME") or None)
        except OSError as exc:
            eprint(f"{me}: spawn failed on node {nd} err TM_ENOTFOUND ({exc.strerror})")
            statuses.append(1)
            continue
        if verbose:
            print(f"{me}: spawned task 0x{c:08X} on logical node {nd}", flush=True)
        if "s" in flags and "o" not in flags:
            finish(c, p)
        else:
            procs.append((c, p))
    if "o" not in flags:
        for c, p in procs:
            finish(c, p)
    if fail_exit and any(s != 0 for s in statuses):
        return 1
    return 0


# ---------------------------------------------------------------------------------------------
# Entry point for the runner: python3 pbsdouble.py _runner <seq> <index|"">
# ---------------------------------------------------------------------------------------------

if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "_runner":
        sys.exit(runner_main(sys.argv[2], sys.argv[3]))
    eprint("pbsdouble.py: internal entry point; use the commands in bin/")
    sys.exit(2)
