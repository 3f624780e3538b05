"""qsub (qsub.1B, src/cmds/qsub.c)."""

from __future__ import annotations

import os
import pwd
import re
import sys
import time

from .cmdline import getopt, make_argv, split_commas, unquote
from .errors import (
    MESSAGES,
    PBSE_BADUSER,
    PBSE_MAXARRAYSIZE,
    PbsError,
    UsageError,
    eprint,
    exit_code,
)
from .ids import job_id
from .jobs import SUB_HELD, SUB_QUEUED, SUB_WAITING
from .plumbing import current_user, parse_destination, queue_check
from .resources import parse_l_option, resolve_resources
from .schedule import schedule_pass
from .state import PBS_VERSION, Store, double_home, load_config

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
                # Measured on 23.06.06 (qsub-v-quoting.log): -v 'BAR=x"y' and -v "BAZ=it's"
                # are refused, rc 1; whether balanced quotes pass was not measured.
                if v.count("'") % 2 or v.count('"') % 2:
                    raise UsageError("qsub: cannot send environment with the job")
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
    if os.geteuid() == 0 and "root" not in cfg["acl_roots"]:
        # Measured on 23.06.06: the server refuses root's jobs unless its acl_roots lists root.
        eprint(f"qsub: {MESSAGES[PBSE_BADUSER]}")
        return PBSE_BADUSER & 0xFF
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
