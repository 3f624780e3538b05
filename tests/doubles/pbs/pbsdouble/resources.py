"""Resource requests (-l, select, place) and fitting their chunks onto the fake hosts."""

from __future__ import annotations

import re

from .cmdline import split_commas, unquote
from .errors import PBSE_BADATVAL, PBSE_UNKRESC, PbsError, UsageError
from .units import fmt_duration, fmt_kb, fmt_size, parse_duration, parse_size

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
# Fitting chunks onto hosts (used by the scheduling pass).
# ---------------------------------------------------------------------------------------------


def host_table(cfg: dict) -> list[dict]:
    hosts = []
    for h in cfg["hosts"]:
        hosts.append({"name": h["name"], "ncpus": int(h.get("ncpus", 0)),
                      "ngpus": int(h.get("ngpus", 0)),
                      "mem": parse_size(h["mem"]) if h.get("mem") else None,
                      "queue": h.get("queue") or None})
    return hosts


def hosts_for_queue(hosts: list[dict], queue: str) -> list[dict]:
    """The hosts a job of this queue may run on.  pbs_node_attributes.7B queue: "Any jobs in a
    queue that has associated vnodes can run only on those vnodes.  If a vnode has an associated
    queue, only jobs in that queue can run on that vnode." (Unset: "Any job in any queue that
    does not have associated vnodes can run on this vnode.")"""
    own = [h for h in hosts if h["queue"] == queue]
    return own or [h for h in hosts if not h["queue"]]


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
            best_total = max((h[k] for h in hosts), default=0)
            best_free = max((max(0, free[h["name"]][k]) for h in hosts), default=0)
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
