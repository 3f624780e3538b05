"""The fake hosts as pbsnodes shows them: node attributes, node states and their times, and the
plain-text, DSV and JSON renderings of src/cmds/pbsnodes.c.

Each configured host is one PBS host with one vnode of the same name (its natural vnode), so
pbs_stathost() and pbs_statvnode() (src/lib/Libifl/pbsD_stathost.c: "single vnode host - use the
real one") give the same attributes for it.
"""

from __future__ import annotations

import re
import time

from .ids import job_id
from .jobs import active_units
from .resources import host_table
from .state import PBS_VERSION, Store
from .units import fmt_kb

# ---------------------------------------------------------------------------------------------
# What runs where, node states, and the times the server records for them.
# ---------------------------------------------------------------------------------------------


def host_usage(store: Store) -> dict[str, dict]:
    """Per host: the resources assigned to running jobs, the job slots (one per CPU, in job
    order) and whether a job holds it exclusively (place=excl/exclhost)."""
    use = {h["name"]: {"ncpus": 0, "ngpus": 0, "mem": 0, "slots": [], "excl": False}
           for h in host_table(store.cfg)}
    for job, index, unit in active_units(store):
        jid = job_id(store.cfg, job, index)
        for h, r in unit.get("alloc") or []:
            u = use.get(h)
            if u is None:
                continue
            for k in ("ncpus", "ngpus", "mem"):
                u[k] += r.get(k, 0)
            # pbs_node_attributes.7B jobs: "<processor number>/<job ID>, ..." (printed
            # "<job ID>/<processor number>", one entry per CPU the job holds on the vnode).
            u["slots"] += [jid] * max(1, r.get("ncpus", 0))
            u["excl"] = u["excl"] or bool(unit.get("excl"))
    return use


def node_state(host: dict, use: dict) -> str:
    """pbs_node_attributes.7B state: "free" (up and capable of accepting additional jobs),
    "job-busy" (all CPUs on the vnode are allocated to jobs), "job-exclusive" (entire vnode is
    exclusively allocated to one job at the job's request).  The fake hosts are never down,
    offline, stale or provisioning."""
    if use["excl"]:
        return "job-exclusive"
    if host["ncpus"] and use["ncpus"] >= host["ncpus"]:
        return "job-busy"
    return "free"


def track_nodes(store: Store, now: float) -> None:
    """Keep pbs_node_attributes.7B last_state_change_time ("the most recent time that this node
    changed state") and last_used_time ("the most recent time that this node finished being used
    for a job ... Set at creation") in state['nodes']; run at the end of every scheduling pass,
    the only place jobs start and (after finish_unit) end."""
    nodes = store.st.setdefault("nodes", {})
    use = host_usage(store)
    for h in host_table(store.cfg):
        name = h["name"]
        state = node_state(h, use[name])
        jobs = sorted(set(use[name]["slots"]))
        rec = nodes.get(name)
        if rec is None:
            nodes[name] = {"state": state, "jobs": jobs, "changed": now, "used": now}
            store.dirty = True
            continue
        if rec["state"] != state:
            rec["state"], rec["changed"] = state, now
            store.dirty = True
        if set(rec["jobs"]) - set(jobs):
            rec["used"] = now
            store.dirty = True
        if rec["jobs"] != jobs:
            rec["jobs"] = jobs
            store.dirty = True


# ---------------------------------------------------------------------------------------------
# Node attributes, in the order the server sends them (src/server/master_node_attr_def.xml:
# Mom, Port, pbs_version, ntype, state, pcpus, Priority, jobs, ..., resources_available,
# resources_assigned, queue, comment, resv_enable, ..., sharing, ..., license, ...,
# last_state_change_time, last_used_time).
# ---------------------------------------------------------------------------------------------


def node_attrs(store: Store, host: dict, use: dict) -> list[tuple[str, object]]:
    """(name, value): a value is a str, or a list of (resource, str) for resources_available
    and resources_assigned.

    Port and pbs_version are left out: pbs_node_attributes.7B makes Port "Readable and settable
    by Operator and Manager", pbsnodes.8B PERMISSIONS needs Operator or Manager privilege "to
    see some output such as PBS version", and master_node_attr_def.xml gives both only
    ATR_DFLAG_OPRD | ATR_DFLAG_MGRD.  The double's user has no such privilege (README), so it
    sees what an ordinary user sees (public user transcripts lack both lines)."""
    name = host["name"]
    now = time.time()
    rec = store.st.get("nodes", {}).get(name) or {"changed": now, "used": now}
    a: list[tuple[str, object]] = [
        # Mom: "Default: Value of vnode resource (vnode name)"; the real server may put the
        # host's FQDN here.
        ("Mom", name),
        ("ntype", "PBS"),
        ("state", node_state(host, use)),
        # pcpus: "The number of physical CPUs on this vnode" (MoM reports it at start).
        ("pcpus", str(host["ncpus"])),
    ]
    if use["slots"]:
        a.append(("jobs", ", ".join(f"{jid}/{i}" for i, jid in enumerate(use["slots"]))))
    # resources_available: what the MoM reports (arch, host, mem in kb, ncpus, vnode), sorted by
    # resource name as pbsnodes prints them.  ngpus only where the host has GPUs (a MoM does not
    # report GPUs; sites set resources_available.ngpus on GPU nodes only).  mem only when the
    # config gives one (real MoMs always report it; see README deviations).
    avail = {"arch": "linux", "host": name, "ncpus": str(host["ncpus"]), "vnode": name}
    if host["mem"] is not None:
        avail["mem"] = fmt_kb(host["mem"])
    if host["ngpus"]:
        avail["ngpus"] = str(host["ngpus"])
    a.append(("resources_available", sorted(avail.items())))
    # resources_assigned: the consumable built-ins a 23.06 server lists for every vnode
    # (accelerator_memory, hbmem, mem, naccelerators, ncpus, vmem), plus ngpus where it is
    # available, "the total amount of each resource allocated to jobs ... running on this vnode".
    assigned = {"accelerator_memory": "0kb", "hbmem": "0kb", "mem": fmt_kb(use["mem"]),
                "naccelerators": "0", "ncpus": str(use["ncpus"]), "vmem": "0kb"}
    if host["ngpus"]:
        assigned["ngpus"] = str(use["ngpus"])
    a.append(("resources_assigned", sorted(assigned.items())))
    if host.get("queue"):
        # queue: "The queue with which this vnode is associated" (unset by default).
        a.append(("queue", host["queue"]))
    a += [("resv_enable", "True"),  # default True
          ("sharing", "default_shared"),  # default default_shared
          ("license", "l"),  # "This vnode is licensed." (set by PBS)
          ("last_state_change_time", str(int(rec["changed"]))),
          ("last_used_time", str(int(rec["used"])))]
    return a


def find_node(store: Store, name: str, host_level: bool) -> tuple[dict, dict] | None:
    """A node by name.  Hosts (pbs_stathost) match case-insensitively (pbsD_stathost.c compares
    host names with strcasecmp); vnodes (pbs_statvnode, -v) match exactly here (the server's
    own vnode lookup was not checked)."""
    use = host_usage(store)
    for h in host_table(store.cfg):
        if h["name"] == name or (host_level and h["name"].lower() == name.lower()):
            return h, use[h["name"]]
    return None


def all_nodes(store: Store) -> list[tuple[dict, dict]]:
    use = host_usage(store)
    return [(h, use[h["name"]]) for h in host_table(store.cfg)]


# ---------------------------------------------------------------------------------------------
# Renderings (src/cmds/pbsnodes.c prt_node(), encode_to_json(); src/lib/Libutil/pbs_json.c).
# ---------------------------------------------------------------------------------------------
_TIME_ATTRS = ("last_state_change_time", "last_used_time")


def node_text(name: str, attrs: list[tuple[str, object]]) -> str:
    """prt_node() default format: the name, then '     <attr>[.<resource>] = <value>' lines
    (the two times through ctime(3)), then an empty line."""
    lines = [name]
    for k, v in attrs:
        if isinstance(v, list):
            lines += [f"     {k}.{rk} = {rv}" for rk, rv in v]
        elif k in _TIME_ATTRS:
            lines.append(f"     {k} = {time.ctime(int(v))}")
        else:
            lines.append(f"     {k} = {v}")
    return "\n".join(lines) + "\n\n"


def node_dsv(name: str, attrs: list[tuple[str, object]], delim: str) -> str:
    """prt_node() -F dsv: 'Name=<name>' then attr=value fields; jobs without its spaces; times
    as seconds since the epoch (the raw attribute value)."""
    fields = [f"Name={name}"]
    for k, v in attrs:
        if isinstance(v, list):
            fields += [f"{k}.{rk}={rv}" for rk, rv in v]
        elif k == "jobs":
            fields.append(f"{k}={str(v).replace(' ', '')}")
        else:
            fields.append(f"{k}={v}")
    return delim.join(fields)


def node_json(attrs: list[tuple[str, object]]) -> list[tuple[str, object]]:
    """encode_to_json(): resources_available and resources_assigned become objects, but
    resources_assigned keeps only non-zero values ("Adding only non zero values"); jobs becomes
    an array of job ids ('/<cpu>' cut off, a job repeated next to itself listed once)."""
    out: list[tuple[str, object]] = []
    for k, v in attrs:
        if k == "resources_assigned":
            kept: list[tuple[str, object]] = []
            for rk, rv in v:  # type: ignore[union-attr]
                if _strtod_value(rv):
                    kept.append((rk, rv))
                elif not rv.startswith("0"):
                    kept.append((rk, Str(rv)))
            out.append((k, kept))
        elif k == "jobs":
            ids: list[str] = []
            for entry in str(v).replace(" ", "").split(","):
                jid = entry.split("/", 1)[0]
                if not ids or ids[-1] != jid:
                    ids.append(jid)
            out.append((k, _Array(ids)))
        else:
            out.append((k, v))
    return out


class _Array(list):
    """A JSON array of strings (JSON_ARRAY of JSON_STRING values)."""


class Str(str):
    """A value always written as a JSON string (JSON_STRING), never as a number."""


_STRTOD = re.compile(r"\s*([+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)")


def _strtod_value(text: str) -> float:
    m = _STRTOD.match(text)
    return float(m.group(1)) if m else 0.0


def _json_scalar(value: str) -> str:
    """add_json_node() with JSON_NULL: a value that strtod() reads whole (trailing blanks
    allowed) is printed as a number unless it starts with '0' and is >= 1 ("In Python3, value
    with leading zeroes is represented as a string"); anything else is a string, escaped like
    strdup_escape(JSON_FULLESCAPE)."""
    if not isinstance(value, Str) and value.strip():
        m = _STRTOD.match(value)
        if m and not value[m.end():].strip() and (value[0] != "0" or float(m.group(1)) < 1):
            return value
    esc = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\b", "\\b")
           .replace("\f", "\\f").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t"))
    return f'"{esc}"'


def render_json(pairs: list[tuple[str, object]]) -> str:
    """generate_json(): '{', one member per line indented by 4 per level, '"key":value' with no
    blanks, objects and arrays opened on the key's line and closed on their own line (an empty
    one too), '}' and a newline at the end."""
    out = ["{"]

    def emit(items: list[tuple[str | None, object]], indent: int) -> None:
        pad = " " * indent
        for n, (k, v) in enumerate(items):
            sep = "," if n < len(items) - 1 else ""
            key = "" if k is None else f'"{k}":'
            if isinstance(v, _Array):
                out.append(f"{pad}{key}[")
                emit([(None, Str(x)) for x in v], indent + 4)
                out.append(f"{pad}]{sep}")
            elif isinstance(v, list):
                out.append(f"{pad}{key}{{")
                emit(v, indent + 4)
                out.append(f"{pad}}}{sep}")
            elif isinstance(v, int):
                out.append(f"{pad}{key}{v}{sep}")
            else:
                out.append(f"{pad}{key}{_json_scalar(v)}{sep}")

    emit(pairs, 4)  # type: ignore[arg-type]
    out.append("}")
    return "\n".join(out)


def nodes_document(server: str, nodes: list[tuple[str, list]]) -> str:
    """The prologue pbsnodes adds before the nodes: timestamp (JSON_INT), pbs_version and
    pbs_server (JSON_STRING), then "nodes" (always present, possibly empty)."""
    return render_json([("timestamp", int(time.time())), ("pbs_version", Str(PBS_VERSION)),
                        ("pbs_server", Str(server)), ("nodes", nodes)])
