"""PBS Pro / OpenPBS output read by pure functions: job states, exit statuses, qstat, qmgr,
pbsnodes (job ids and qsub's answer: `pbs_ids`).

``qstat -f -F json`` is the main source. Its JSON is known to break (openpbs #1255 and PR #2603:
env values such as ``005`` unquoted; #2541: ``qsub -V`` bash functions; PR #2049: bad escapes;
PR #2675: plaintext around the JSON; #2677: duplicate keys), so `parse_qstat_json` repairs what
it can and otherwise reads job by job. `parse_qstat_text` reads plain ``qstat -f``.

Exit statuses: OpenPBS ``src/include/job.h`` (JOB_EXEC_*), ``src/server/req_jobobit.c``
(what the server does with each), ``src/server/req_delete.c`` (qdel).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from hpcdet.schedulers.base import JobStatus, Partition
from hpcdet.schedulers.pbs_json import job_ids, load_json, scan_jobs, table_instead_of_jobs
from hpcdet.states import JobState

log = logging.getLogger(__name__)

# qstat.1B, the "S" column. None: finished, and the exit status decides (`final_state`).
STATE_MAP: dict[str, JobState | None] = {
    "B": JobState.RUNNING,  # array job: at least one subjob has started
    "E": JobState.RUNNING,  # exiting after having run
    "F": None,
    "H": JobState.PENDING,
    "M": JobState.PENDING,  # moved to another server, where it goes on
    "Q": JobState.PENDING,
    "R": JobState.RUNNING,
    "S": JobState.RUNNING,  # suspended, as Slurm's SUSPENDED
    "T": JobState.PENDING,  # being moved
    "U": JobState.RUNNING,  # suspended while its workstation is busy
    "W": JobState.PENDING,  # waiting for its start time (qsub -a)
    "X": None,  # subjob finished or deleted
}

# job.h JOB_EXEC_*; -24..-30 since OpenPBS PR #2135 (Nov 2020): older servers report a walltime
# kill as 271 (SIGTERM). job_obit() requeues the retry codes, so a finished job carries one only
# when it could not be requeued (e.g. qsub -r n).
_EXEC_CODES: dict[int, tuple[str, JobState, str]] = {
    -1: ("JOB_EXEC_FAIL1", JobState.FAILED, "PBS could not start it"),
    -2: ("JOB_EXEC_FAIL2", JobState.FAILED, "PBS could not start it after staging its files"),
    -3: ("JOB_EXEC_RETRY", JobState.NODE_FAIL, "its node failed to start it"),
    -4: ("JOB_EXEC_INITABT", JobState.NODE_FAIL, "aborted when its node's MoM restarted"),
    -5: ("JOB_EXEC_INITRST", JobState.NODE_FAIL, "aborted when its node's MoM restarted"),
    -6: ("JOB_EXEC_INITRMG", JobState.NODE_FAIL, "aborted when its node's MoM restarted"),
    -7: ("JOB_EXEC_BADRESRT", JobState.NODE_FAIL, "its restart from a checkpoint failed"),
    -10: ("JOB_EXEC_FAILUID", JobState.FAILED, "invalid user or group on its node"),
    -11: ("JOB_EXEC_RERUN", JobState.NODE_FAIL, "requeued, and not rerunnable"),
    -12: ("JOB_EXEC_CHKP", JobState.PREEMPTED, "checkpointed and killed"),
    -13: ("JOB_EXEC_FAIL_PASSWORD", JobState.FAILED, "bad password"),
    -14: ("JOB_EXEC_RERUN_SIS_FAIL", JobState.NODE_FAIL, "one of its nodes failed"),
    -15: ("JOB_EXEC_QUERST", JobState.PREEMPTED, "requeued to restart from its checkpoint"),
    -16: ("JOB_EXEC_FAILHOOK_RERUN", JobState.NODE_FAIL, "a hook refused to start it for now"),
    -17: ("JOB_EXEC_FAILHOOK_DELETE", JobState.FAILED, "a hook refused to start it"),
    -18: ("JOB_EXEC_HOOK_RERUN", JobState.NODE_FAIL, "a hook requeued it"),
    -19: ("JOB_EXEC_HOOK_DELETE", JobState.FAILED, "a hook deleted it"),
    -20: ("JOB_EXEC_RERUN_MS_FAIL", JobState.NODE_FAIL, "lost contact with its first node"),
    -21: ("JOB_EXEC_FAIL_SECURITY", JobState.NODE_FAIL, "unsafe PBS directories on its node"),
    -22: ("JOB_EXEC_HOOKERROR", JobState.NODE_FAIL, "a hook failed or timed out"),
    -23: ("JOB_EXEC_FAIL_KRB5", JobState.FAILED, "no Kerberos credentials"),
    -24: ("JOB_EXEC_KILL_NCPUS_BURST", JobState.FAILED, "killed: it used more CPUs than asked"),
    -25: ("JOB_EXEC_KILL_NCPUS_SUM", JobState.FAILED, "killed: it used more CPUs than asked"),
    -26: ("JOB_EXEC_KILL_VMEM", JobState.FAILED, "killed: it exceeded its vmem"),
    -27: ("JOB_EXEC_KILL_MEM", JobState.FAILED, "killed: it exceeded its mem"),
    -28: ("JOB_EXEC_KILL_CPUT", JobState.FAILED, "killed: it exceeded its cput"),
    -29: ("JOB_EXEC_KILL_WALLTIME", JobState.TIMEOUT, "killed: it exceeded its walltime"),
    -30: ("JOB_EXEC_JOINJOB", JobState.NODE_FAIL, "a node failed to join it"),
}
# MoM reports a job killed by signal N as 256 + N (req_delete.c: SIGKILL + 0x100).
_SIGNALED = 256
# job.h JOB_SUBSTATE_TERMINATED: a history job that qdel ended; JOB_SUBSTATE_FAILED: one
# that failed, an array whose subjobs did not all succeed included (23.06.06 gives such an
# array the Exit_status of its last subjob to end, 0 when that one succeeded).
_SUBSTATE_TERMINATED = 91
_SUBSTATE_FAILED = 93
_SUBSTATE_DEPENDENCY = 22
# qdel appends " and terminated" to the comment (e.g. "Not Running: ... and terminated"), on
# 23.06.06 also " by user@host" for a job that ran ("... and terminated by pbsuser@pbshead").
_TERMINATED = re.compile(r" and terminated(?: by \S+)?$")
_DELETED = re.compile(r"\band terminated(?: by \S+)?$|\bdeleted\b", re.IGNORECASE)


def final_state(
    exit_status: int | None, comment: str, *, substate: int | None = None,
    over_walltime: bool = False,
) -> JobState:
    """How a finished job (F) or subjob (X) ended.

    Args:
        exit_status: ``Exit_status``; None when PBS set none (a job deleted before it ran).
            An array job's own status is 0, 1 or 2 from its last subjob to end, not from all.
        comment: the job's ``comment``; qdel leaves "... and terminated" there.
        substate: ``substate``; 91 means qdel ended the job (whatever its exit status: a
            script that traps SIGTERM may exit 0), 93 that it failed (an array: a subjob did).
        over_walltime: it used its whole walltime, for servers older than
            JOB_EXEC_KILL_WALLTIME that report that kill as a signal.

    Returns:
        the state of a JOB_EXEC_* code; CANCELED for a job qdel deleted; COMPLETED for 0
        unless the substate says it failed; TIMEOUT for a signal at the walltime; FAILED
        otherwise.
    """
    if exit_status is not None and exit_status < 0:
        return _EXEC_CODES.get(exit_status, ("", JobState.FAILED, ""))[1]
    if substate == _SUBSTATE_TERMINATED or _DELETED.search(" ".join(comment.split())):
        return JobState.CANCELED
    if exit_status == 0:
        return JobState.FAILED if substate == _SUBSTATE_FAILED else JobState.COMPLETED
    if exit_status is not None and exit_status > _SIGNALED and over_walltime:
        return JobState.TIMEOUT
    return JobState.FAILED


def exit_code(exit_status: int | None) -> int | None:
    """``Exit_status`` as a shell reports it: 128 + N for signal N, None for JOB_EXEC_* codes."""
    if exit_status is None or exit_status < 0:
        return None
    if exit_status >= _SIGNALED:
        signal = exit_status - _SIGNALED
        return 128 + signal if 0 < signal < 128 else None
    return exit_status


# Scheduler comments after "Not Running: ", in words (most specific first).
_WAITING = (
    ("Insufficient amount of resource", "waiting for nodes or CPUs/GPUs to become free"),
    ("Insufficient amount of server resource", "waiting: a server-wide resource limit is reached"),
    ("Insufficient amount of queue resource", "waiting: the queue's resource limit is reached"),
    ("Not enough free nodes", "waiting for nodes to become free"),
    ("Job is requesting an exclusive node", "waiting for a whole node to become free"),
    ("Node is in an ineligible state", "waiting: the nodes it needs are down or offline"),
    ("Job would conflict with reservation or top job",
     "waiting: it would delay a reservation or a higher-priority job"),
    ("Draining system", "waiting: nodes are kept free for a higher-priority job"),
    ("Queue not started", "waiting: the queue is stopped"),
)
_HELD_BY = re.compile(r"Job held by (\S+) on (.+)")


def reason_in_words(comment: str) -> str:
    """A job's ``comment`` as a sentence for people; comments it does not know stay as they are.

    Args:
        comment: e.g. "Not Running: Insufficient amount of resource: ncpus (R: 8 A: 4 T: 4)".

    Returns:
        e.g. "waiting for nodes or CPUs/GPUs to become free (Insufficient amount of
        resource: ncpus (R: 8 A: 4 T: 4))"; "" for an empty comment.
    """
    text = " ".join(comment.split())
    terminated = _TERMINATED.search(text)
    if terminated:
        before = reason_in_words(text[: terminated.start()])
        return f"deleted ({before})" if before else "deleted"
    if text.startswith("Can Never Run: "):
        return "can never start: " + text[len("Can Never Run: "):]
    if text.startswith("Not Running: "):
        detail = text[len("Not Running: "):]
        for start, words in _WAITING:
            if detail.startswith(start):
                return f"{words} ({detail})"
        if "limit" in detail:
            return f"waiting: a limit is reached ({detail})"
        return f"waiting: {detail}"
    held = _HELD_BY.fullmatch(text)
    if held:
        return f"held by {held.group(1)} since {held.group(2)} (release it with qrls)"
    if text.lower().startswith("job held, too many failed attempts to run"):
        return "held: PBS failed to start it too many times (an administrator must release it)"
    return text


def _idle_in_words(native: str, attrs: Mapping[str, Any]) -> str:
    """Why a held or waiting job without a comment does not run."""
    if native == "W":
        return "waiting for its start time (qsub -a)"
    if native != "H":
        return ""
    if _int(attrs.get("substate")) == _SUBSTATE_DEPENDENCY:
        return "waiting for another job to finish (depend)"
    holds = _text(attrs.get("Hold_Types"))
    if "u" in holds:
        return "held by you (release it with qrls)"
    if "o" in holds or "s" in holds:
        return "held by an operator or by PBS"
    return "held: bad password" if "p" in holds else "held"


def _exit_in_words(exit_status: int) -> str:
    name, _, words = _EXEC_CODES.get(exit_status, ("JOB_EXEC_*", JobState.FAILED, "PBS error"))
    return f"exit status {exit_status} ({name}: {words})"


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = _text(value).strip()
    return int(text) if re.fullmatch(r"[+-]?\d+", text) else None


def _nested(attrs: Mapping[str, Any], group: str, key: str) -> Any:
    inner = attrs.get(group)
    return inner.get(key) if isinstance(inner, Mapping) else None


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _epoch(text: str) -> float | None:
    """PBS's local times (``Tue Nov 24 10:00:00 2026``, as ctime) as epoch seconds."""
    parts = text.split()
    try:
        _, month, day, clock, year = parts
        hour, minute, second = (int(p) for p in clock.split(":"))
        fields = (int(year), _MONTHS.index(month) + 1, int(day), hour, minute, second, 0, 0, -1)
        return time.mktime(fields)
    except (ValueError, OverflowError):
        return None


def _seconds(value: Any) -> int | None:
    parts = _text(value).split(":")
    if not all(p.isdigit() for p in parts):
        return None
    total = 0
    for part in parts:
        total = total * 60 + int(part)
    return total


def _hosts(exec_host: str) -> str:
    """``pbs-a/0*4+pbs-b/0*4`` -> ``pbs-a+pbs-b``."""
    hosts = [chunk.split("/")[0].strip() for chunk in exec_host.split("+")]
    return "+".join(dict.fromkeys(h for h in hosts if h))


def _status(attrs: Mapping[str, Any]) -> JobStatus:
    native = _text(attrs.get("job_state")).strip()
    comment = " ".join(_text(attrs.get("comment")).split())
    exit_status = _int(attrs.get("Exit_status"))
    reason = reason_in_words(comment) or _idle_in_words(native, attrs)
    if native in ("F", "X"):
        used = _seconds(_nested(attrs, "resources_used", "walltime"))
        limit = _seconds(_nested(attrs, "Resource_List", "walltime"))
        state = final_state(exit_status, comment, substate=_int(attrs.get("substate")),
                            over_walltime=bool(limit and used is not None and used >= limit))
        if exit_status is not None and exit_status < 0:
            meaning = _exit_in_words(exit_status)
            reason = f"{reason}; {meaning}" if reason else meaning
    else:
        mapped = STATE_MAP.get(native)
        if mapped is None:
            log.warning("unknown PBS job state %r", native)
        state = mapped or JobState.UNKNOWN
    start = _text(attrs.get("stime"))
    # 23.06.06 accepts a job that can never fit (qsub exits 0) and leaves it queued with this.
    never_runs = native == "Q" and comment.startswith("Can Never Run")
    if state == JobState.PENDING:
        start = _text(_nested(attrs, "estimated", "start_time"))
    return JobStatus(
        state=state, reason=reason, native=native,
        exit_code=exit_code(exit_status) if native in ("E", "F", "X") else None,
        nodes=_hosts(_text(attrs.get("exec_host"))), name=_text(attrs.get("Job_Name")),
        priority=_int(attrs.get("Priority")), partition=_text(attrs.get("queue")),
        start=_epoch(start) if start else None,
        workdir=_text(_nested(attrs, "Variable_List", "PBS_O_WORKDIR")),
        never_runs=never_runs,
        used_seconds=_seconds(_nested(attrs, "resources_used", "walltime")),
        used_gpus=_int(_nested(attrs, "Resource_List", "ngpus")),
        used_cpus=_int(_nested(attrs, "Resource_List", "ncpus")),
    )


def _unreadable(what: str, text: str) -> ValueError:
    return ValueError(f"could not read {what}: {text[:200]!r}")


# -- qstat -f -F json -----------------------------------------------------------------------

def _owned_by(attrs: Mapping[str, Any], owner: str | None) -> bool:
    """Whether ``Job_Owner`` (``user@host``) names ``owner``; a job without one is kept."""
    if owner is None:
        return True
    found = _text(attrs.get("Job_Owner")).strip()
    return not found or found.partition("@")[0] == owner


def parse_qstat_json(text: str, owner: str | None = None) -> dict[str, JobStatus]:
    """Jobs from ``qstat -f -F json [-x] -t [ids]``, keyed by id as PBS prints it.

    Keys look like ``12.server``, ``12[].server`` (an array) or ``12[3].server`` (a subjob).
    Never raises on the known defects: the JSON is read as is, else repaired (unquoted values
    such as ``005``, raw control characters, stray quotes, invalid escapes, plaintext around
    the JSON), else each job is read from its own text, so one broken job costs only itself.
    A job whose state cannot be found is UNKNOWN. Jobs missing from the output (#2672: one
    job only for several ids on some builds) are missing from the result, and so is
    everything when nothing matched (23.06 then prints no ``Jobs`` key at all).

    Args:
        owner: keep only the jobs whose ``Job_Owner`` is this user (``user@host``).

    Raises:
        ValueError: nothing readable at all (blank text gives an empty dict), or qstat's
            text table where the jobs should be (23.06's ``-u`` with ``-F json``).
    """
    if not text.strip():
        return {}
    if table_instead_of_jobs(text):
        raise ValueError(
            "qstat printed its text table of jobs instead of JSON (OpenPBS 23.06 does so for "
            "`qstat -f -F json -u USER`, openpbs #2676); ask without -u: "
            f"{text.strip()[:200]!r}")
    doc = load_json(text)
    listed = doc.get("Jobs") if isinstance(doc, dict) else None
    jobs: dict[str, Any] = {}
    if isinstance(listed, dict):
        jobs = {k: v for k, v in listed.items() if isinstance(v, dict)}
    # A job the JSON lost (a broken document, a duplicate "Jobs" key) is read from its text.
    missing = job_ids(text) - set(jobs)
    if missing:
        jobs.update((k, v) for k, v in scan_jobs(text).items() if k in missing)
    if not jobs and not isinstance(doc, dict) and '"pbs_server"' not in text:
        raise _unreadable("qstat JSON output", text)
    return {job_id: _status(attrs) for job_id, attrs in jobs.items() if _owned_by(attrs, owner)}


# -- qstat -f (text) ----------------------------------------------------------------------------

_TEXT_ATTR = re.compile(r"^(\s+)([\w.]+) =(?: (.*))?$")


def _variables(text: str) -> dict[str, str]:
    """``Variable_List`` text: ``K=V`` pairs split at commas that are not escaped as ``\\,``."""
    pairs = (item.partition("=") for item in re.split(r"(?<!\\),", text))
    return {k.strip(): v.replace("\\,", ",") for k, sep, v in pairs if sep}


def _attributes(lines: list[str]) -> dict[str, str]:
    """``key = value`` lines of ``qstat -f`` or ``qmgr``, all at the first one's indent; other
    indented lines go on the value before (PBS wraps long values after a comma onto lines that
    start with a tab)."""
    found: dict[str, str] = {}
    key, indent = "", None
    for line in lines:
        match = _TEXT_ATTR.match(line)
        if match and indent in (None, match.group(1)):
            indent, key = match.group(1), match.group(2)
            found[key] = (match.group(3) or "").strip()
        elif key and line.strip() and line[:1].isspace():
            found[key] += line.strip()
    return found


def parse_qstat_text(text: str, owner: str | None = None) -> dict[str, JobStatus]:
    """Jobs from plain ``qstat -f [-x] -t [ids]``, for servers without a usable ``-F json``;
    of ``owner`` only, if given (as `parse_qstat_json`).

    Each job starts at ``Job Id: <id>``; its ``    key = value`` lines follow, long values
    continued on lines that start with a tab. Dotted keys (``Resource_List.walltime``) nest
    as in the JSON. Other lines (messages, a merged stderr) are skipped.

    Raises:
        ValueError: no ``Job Id:`` line in text that is not blank.
    """
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("Job Id:"):
            current = blocks.setdefault(line.partition(":")[2].strip(), [])
        elif current is not None:
            current.append(line)
    if not blocks:
        if text.strip():
            raise _unreadable("qstat -f output", text)
        return {}
    result = {}
    for job_id, lines in blocks.items():
        attrs: dict[str, Any] = {}
        for key, value in _attributes(lines).items():
            group, dot, inner = key.partition(".")
            if dot:
                attrs.setdefault(group, {})[inner] = value
            else:
                attrs[key] = _variables(value) if key == "Variable_List" else value
        if _owned_by(attrs, owner):
            result[job_id] = _status(attrs)
    return result


# -- qmgr, pbsnodes -------------------------------------------------------------------------

def parse_qmgr_server(text: str) -> dict[str, str]:
    """``qmgr -c 'list server'``: the server's attributes; its name under ``name``.

    The output is ``Server <name>`` then ``\\tkey = value`` lines; dotted keys stay flat
    (``resources_default.ncpus``).
    """
    lines = text.splitlines()
    found = _attributes(lines)
    for line in lines:
        if line.startswith("Server "):
            found["name"] = line[len("Server "):].strip()
    return found


ALL_NODES = "(all nodes)"


def parse_pbsnodes(text: str) -> Partition | None:
    """The execution hosts of ``pbsnodes -a -F json`` as one node set that any queue's jobs
    may use: how many, and the most CPUs and GPUs one offers (``resources_available``).
    Nodes tied to a queue (``queue``, pbs_node_attributes.7B) are left out; nodes that are
    down or offline still count, as Slurm's partitions count theirs.

    Raises:
        ValueError: the JSON cannot be read.
    """
    doc = load_json(text)
    if not isinstance(doc, dict):
        raise _unreadable("pbsnodes JSON output", text)
    nodes = doc.get("nodes")
    found: list[dict[str, Any]] = [
        n["resources_available"] for n in (nodes.values() if isinstance(nodes, dict) else ())
        if isinstance(n, dict) and isinstance(n.get("resources_available"), dict)
        and not n.get("queue")  # a node tied to one queue takes only that queue's jobs
    ]
    if not found:
        return None
    return Partition(ALL_NODES, len(found), max(_int(r.get("ncpus")) or 0 for r in found),
                     max(_int(r.get("ngpus")) or 0 for r in found), default=True)


__all__ = [
    "ALL_NODES", "STATE_MAP", "exit_code", "final_state", "parse_pbsnodes", "parse_qmgr_server",
    "parse_qstat_json", "parse_qstat_text", "reason_in_words",
]
