"""pbsdsh: run a program once per node-file line inside a job."""

from __future__ import annotations

import json
import os
import sys

from .cmdline import getopt
from .errors import UsageError, eprint
from .state import PBS_VERSION, load_config

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

    # Measured on OpenPBS 23.06.06 (shared/reference/openpbs-23.06/job-env-2node-pbsdsh.txt):
    # a task's PBS_TASKNUM is 8 hex digits, the node in its top bits ("00000002" on the first
    # node, whose task 1 is the job script; "40000001" on the second), and the task on the
    # first node has no PBS_NODEFILE.
    hosts = list(dict.fromkeys(nodes))
    per_host: dict[str, int] = {}
    for c, nd in enumerate(targets):
        env = dict(base)
        host = hosts.index(nodes[nd])
        per_host[nodes[nd]] = per_host.get(nodes[nd], 0 if host else 1) + 1
        env.update({"PBS_TASKNUM": f"{(host << 30) + per_host[nodes[nd]]:08X}",
                    "PBS_NODENUM": str(nd),
                    "PBS_VNODENUM": str(nd), "PBS_DOUBLE_HOST": nodes[nd]})
        if nodes[nd] == nodes[0]:
            env.pop("PBS_NODEFILE", None)
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
