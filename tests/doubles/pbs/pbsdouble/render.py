"""qstat output: job attributes in qstat -f order, as JSON, DSV, full text or the table."""

from __future__ import annotations

import json
import re
import time

from .ids import job_id
from .jobs import SUB_QUEUED, array_counts, queued_indices
from .state import PBS_VERSION, Store
from .units import ctime_str, fmt_duration, fmt_ranges

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
    if state == "X" and job["state"] == "F":
        state = "F"  # 23.06.06: X while the array runs, F once it is history
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
               f"Expired:{c['Expired']}"),
              ("array_indices_submitted", arr["submitted"]),
              ("array_indices_remaining", fmt_ranges(queued_indices(job), arr["step"]))]
        if arr.get("max_run"):
            a.append(("max_run_subjobs", str(arr["max_run"])))
    if index is not None and str(index) in job["array"]["subjobs"]:
        # 23.06.06: a queued subjob has neither.
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


def render_alt_table(store: Store, rows: list[tuple[str, dict, int | None]]) -> str:
    """qstat.1B's alternate (-a) table, as 23.06.06 prints it for ``-u``: a blank line, the
    server, a two-line heading, one row per job (with -t the subjobs, not their array)."""
    out = ["", f"{store.cfg['server']}: ",
           " " * 60 + "Req'd  Req'd   Elap",
           "Job ID          Username Queue    Jobname    SessID NDS TSK Memory Time  S Time",
           "--------------- -------- -------- ---------- ------ --- --- ------ ----- - -----"]
    subjobs = {job["seq"] for _jid, job, index in rows if index is not None}
    for jid, job, index in rows:
        if index is None and job["seq"] in subjobs:
            continue
        unit = job if index is None else job["array"]["subjobs"].get(str(index), {"state": "Q"})
        running = unit["state"] in ("R", "E")
        sess = str(unit.get("session_id") or "--") if running else "--"
        elapsed = fmt_duration(time.time() - unit["stime"])[:5] if running and unit.get(
            "stime") else "--"
        out.append(f"{jid[:15]:<15} {job['owner'][:8]:<8} {job['queue'][:8]:<8} "
                   f"{job['name'][:10]:<10} {sess:>6} {1:>3} {job['rl'].get('ncpus', 1):>3} "
                   f"{'--':>6} {'--':>5} {unit['state']} {elapsed}")
    return "\n".join(out)
