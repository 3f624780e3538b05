"""Read-only commands: qstat (qstat.1B) and qmgr (qmgr.8B)."""

from __future__ import annotations

from .cmdline import getopt
from .errors import (
    MESSAGES,
    PBSE_HISTJOBID,
    PBSE_PERM,
    PBSE_UNKQUE,
    PbsError,
    UsageError,
    eprint,
    exit_code,
)
from .ids import ID_RE, JobRef, job_id
from .jobs import active_units, ordered_jobs
from .plumbing import report, resolve
from .render import job_attrs, render_dsv, render_full, render_json, render_table
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
