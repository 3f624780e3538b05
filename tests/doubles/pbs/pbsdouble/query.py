"""Read-only commands: qstat (qstat.1B), qmgr (qmgr.8B) and pbsnodes (pbsnodes.8B)."""

from __future__ import annotations

from .cmdline import getopt
from .errors import (
    MESSAGES,
    PBSE_HISTJOBID,
    PBSE_PERM,
    PBSE_UNKNODE,
    PBSE_UNKQUE,
    PbsError,
    UsageError,
    eprint,
    exit_code,
)
from .ids import ID_RE, JobRef, job_id
from .jobs import active_units, ordered_jobs
from .nodes import Str as JsonStr
from .nodes import all_nodes, find_node, node_attrs, node_dsv, node_json, node_text, nodes_document
from .plumbing import report, resolve
from .render import (
    job_attrs,
    render_alt_table,
    render_dsv,
    render_full,
    render_json,
    render_table,
)
from .schedule import schedule_pass
from .state import PBS_VERSION, Store, double_home, load_config

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
        if "f" in flags and users is not None and fmt and fmt.lower() == "json":
            # 23.06.06: -u switches to the -a table and the JSON follows without the jobs,
            # exit 0 (fixed after 23.06, openpbs #2676).
            print(render_alt_table(store, items))
            print(render_json(store, []), end="")
        elif "f" in flags:
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
    if any(h.get("queue") == name for h in store.cfg["hosts"]):
        # pbs_queue_attributes.7B hasnodes: "When True, there are vnodes associated with this
        # queue." (set by PBS; shown only when True).
        out.append(("hasnodes", "True"))
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
# pbsnodes (pbsnodes.8B; option handling and messages from src/cmds/pbsnodes.c main())
# ---------------------------------------------------------------------------------------------
PBSNODES_USAGE = ("usage:\tpbsnodes [-{o|r}][-C comment][-s server] host host ...\n"
                  "\tpbsnodes -l [-s server]\n"
                  "\tpbsnodes [-s server] -v vnode vnode ...\n"
                  "\tpbsnodes -a[v][S[j][L]][-F format][-D delim][-s server]\n"
                  "\tpbsnodes -[H][S[j][L]][-F format][-D delim] host host ...\n"
                  "\tpbsnodes --version\n")
_MARKING = ("DOWN", "CLEAR", "OFFLINE", "RESET", "UPDATE_COMMENT")


def _permuting_getopt(argv: list[str], spec: str) -> tuple[list[tuple[str, str]], list[str]]:
    """glibc getopt() as pbsnodes calls it: options may follow operands ('pbsnodes pbs-a -F
    json'); '--' ends the options."""
    pairs: list[tuple[str, str]] = []
    operands: list[str] = []
    rest = list(argv)
    while rest:
        got, left, dashdash = getopt("pbsnodes", rest, spec)
        pairs += got
        if dashdash or not left:
            operands += left
            break
        operands.append(left[0])
        rest = left[1:]
    return pairs, operands


def pbsnodes_main(argv: list[str]) -> int:
    if argv == ["--version"]:
        print(f"pbs_version = {PBS_VERSION}")
        return 0
    home = double_home("pbsnodes")
    cfg = load_config(home)
    oper, do_vnodes, errflg, quiet = "LISTSP", False, not argv, False
    fmt, delim, summary = "default", "|", False
    try:
        pairs, operands = _permuting_getopt(argv, "acC:dD:F:HjlLoqrs:Sv")
    except UsageError as e:
        eprint(str(e))
        pairs, operands, errflg = [], [], True
    listing = ("LISTSP", "ALL", "LISTSPNV")
    for c, v in pairs:
        # Each option is only valid in some "operations"; anything else is a usage error.
        if c == "a":
            oper, errflg = ("ALL", errflg) if oper == "LISTSP" else (oper, True)
        elif c in "cdl":
            new = {"c": "CLEAR", "d": "DOWN", "l": "LISTMRK"}[c]
            oper, errflg = (new, errflg) if oper == "LISTSP" or do_vnodes else (oper, True)
        elif c == "C":
            if oper == "LISTSP":
                oper = "UPDATE_COMMENT"
            elif oper not in ("OFFLINE", "RESET"):
                errflg = True
        elif c in "or":
            new = "OFFLINE" if c == "o" else "RESET"
            ok = oper in ("LISTSP", "UPDATE_COMMENT") or do_vnodes
            oper, errflg = (new, errflg) if ok else (oper, True)
        elif c == "D":
            delim, errflg = (v, errflg) if oper in listing else (delim, True)
        elif c == "F":
            if v.lower() in ("default", "dsv", "json"):
                fmt = v.lower()
            else:
                errflg = True
        elif c == "H":
            oper, errflg = ("LISTSPNV", errflg) if oper == "LISTSP" else (oper, True)
        elif c in "jLS":
            errflg = errflg or oper not in listing
            summary = summary or c == "S"
        elif c == "q":
            quiet = True
        elif c == "v":
            do_vnodes, errflg = (True, errflg) if oper in ("LISTSP", "ALL") else (do_vnodes, True)
        # -s <server>: there is only the one (double) server; the value is ignored.
    needs_operands = ("CLEAR", "OFFLINE", "RESET", "LISTSPNV", "LISTSP", "UPDATE_COMMENT")
    if (errflg or (oper == "LISTMRK" and operands)
            or (oper in needs_operands and not operands)
            or (summary and oper not in listing)):
        # Note: pbsnodes.8B says "-v" alone lists every vnode, but pbsnodes.c main() treats
        # "pbsnodes -v" without operands as a usage error; the double follows the source.
        if not quiet:
            eprint(PBSNODES_USAGE)
        return 1
    if summary:
        eprint("pbsnodes: pbsdouble does not implement -S")
        return 2
    rc = 0
    with Store(home, cfg) as store:
        schedule_pass(store)
        if oper in _MARKING:
            # marknode(): pbs_manager() needs Operator or Manager privilege (pbsnodes.8B
            # PERMISSIONS), which nobody has on the double.
            for name in operands:
                if oper == "DOWN" and find_node(store, name, True) is None:
                    continue
                if not quiet:
                    eprint(f"Error marking node {name} - {MESSAGES[PBSE_PERM]}")
                rc = 1
            return rc
        if oper in ("ALL", "LISTMRK", "LISTSPNV") or do_vnodes:
            if not all_nodes(store):
                if not quiet:
                    eprint("pbsnodes: No nodes found")
                return 0
        if oper == "LISTMRK":
            # "Lists all hosts marked as DOWN or OFFLINE": the fake hosts never are.
            return 0
        shown: list[tuple[str, list]] = []

        def show(host: dict, use: dict) -> None:
            attrs = node_attrs(store, host, use)
            if fmt == "json":
                shown.append((host["name"], node_json(attrs)))
            elif fmt == "dsv":
                print(node_dsv(host["name"], attrs, delim))
            else:
                print(node_text(host["name"], attrs), end="")

        def unknown(name: str) -> None:
            nonlocal rc
            text = MESSAGES[PBSE_UNKNODE]
            if fmt == "json":
                # In JSON the error is an entry of "nodes" and the exit status stays 0.
                shown.append((name, [("Error", JsonStr(text))]))
            else:
                eprint(f"Node: {name},  Error: {text}")
                rc = 1

        if oper == "ALL":
            for host, use in all_nodes(store):
                show(host, use)
        elif oper == "LISTSP":
            for name in operands:
                found = find_node(store, name, not do_vnodes)
                if found is None:
                    unknown(name)
                else:
                    show(*found)
        else:  # LISTSPNV (-H): the vnodes whose resources_available.host is an operand
            for host, use in all_nodes(store):
                if host["name"] in operands:
                    show(host, use)
            for name in operands:
                if find_node(store, name, True) is None:
                    unknown(name)
        if fmt == "json":
            print(nodes_document(cfg["server"], shown))
    return 1 if rc else 0
