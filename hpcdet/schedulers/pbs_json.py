"""``qstat -F json`` and ``pbsnodes -F json`` as OpenPBS prints them, read despite their known
defects (openpbs #1255 and PR #2603: values such as ``005`` unquoted; #2541: ``qsub -V`` bash
functions; PR #2049: bad escapes; PR #2675: plaintext around the JSON; #2677: duplicate keys):
`load_json` repairs what it can, `scan_jobs` reads what is left job by job.
"""

from __future__ import annotations

import json
import re
from typing import Any

_STRING = r'"(?:[^"\\\n]|\\.)*"'
_VALID_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")
_BARE_VALUE = re.compile(
    rf'^([ \t]*{_STRING}[ \t]*:[ \t]*)([^"{{\[\s][^\n]*?)([ \t]*,?[ \t]*)$', re.MULTILINE)
_JOB_HEAD = re.compile(
    r'^[ \t]*"(\d+(?:\[\d*\])?(?:\.[^"\s]*)?)"[ \t]*:[ \t]*\{', re.MULTILINE)
_STRING_STOP = re.compile(r'["\\\x00-\x1f]')
_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _json_body(text: str) -> str:
    """The lines from the first ``{`` to the last ``}``, without plaintext in between."""
    lines = text.splitlines()
    opens = [i for i, line in enumerate(lines) if line.startswith("{")]
    closes = [i for i, line in enumerate(lines) if line.startswith("}")]
    if not opens or not closes or closes[-1] < opens[0]:
        return text
    kept: list[str] = []
    for line in lines[opens[0]: closes[-1] + 1]:
        stripped = line.strip()
        # A JSON member starts with one of these; after a complete member, nothing else can
        # follow but plaintext (PR #2675's qstat -a table, messages of a merged stderr).
        if (stripped and stripped[0] not in '"{}[]' and kept
                and kept[-1].rstrip().endswith(("{", "[", ",", "}", "]"))):
            continue
        kept.append(line)
    return "\n".join(kept)


def _fix_strings(body: str) -> str:
    """Escape raw control characters and stray quotes in strings; drop invalid backslashes."""
    out: list[str] = []
    pos, end = 0, len(body)
    while pos < end:
        start = body.find('"', pos)
        if start < 0:
            out.append(body[pos:])
            break
        out.append(body[pos: start + 1])
        pos = start + 1
        while pos < end:
            stop = _STRING_STOP.search(body, pos)
            if stop is None:
                out.append(body[pos:])
                pos = end
                break
            out.append(body[pos: stop.start()])
            char, pos = stop.group(), stop.end()
            if char == "\\":
                follow = body[pos: pos + 1]
                if follow and follow in '"\\/bfnrt':
                    out.append(char + follow)
                    pos += 1
                elif follow == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", body[pos + 1: pos + 5]):
                    out.append(body[pos - 1: pos + 5])
                    pos += 5
                # else: "\," "\'" from Variable_List; PBS's own fix (PR #2049) drops the "\".
            elif char == '"':
                rest = body[pos: pos + 80].lstrip(" \t")
                if not rest or rest[0] in ",:}]\r\n":
                    out.append(char)
                    break
                out.append('\\"')
            else:
                out.append(_ESCAPES.get(char, f"\\u{ord(char):04x}"))
    return "".join(out)


def _quote_bare(match: re.Match[str]) -> str:
    value = match.group(2).strip()
    if _VALID_SCALAR.fullmatch(value):
        return match.group(0)
    return match.group(1) + json.dumps(value) + match.group(3)


def _repair(text: str) -> str:
    return _BARE_VALUE.sub(_quote_bare, _fix_strings(_json_body(text)))


def load_json(text: str) -> Any:
    """json.loads, then again after repairing the known defects; None if neither reads.

    Duplicate keys (#2677): the last one wins, here and in the per-job scan.
    """
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json.loads(_repair(text))
    except ValueError:
        return None


def _object_text(block: str, name: str) -> tuple[int, int] | None:
    """Where the object ``"name": {...}`` is in ``block``: up to the ``}`` at its own indent."""
    head = re.search(rf'^([ \t]*)"{re.escape(name)}"[ \t]*:[ \t]*\{{', block, re.MULTILINE)
    if head is None:
        return None
    indent = re.escape(head.group(1))
    close = re.compile(rf"^{indent}\}},?[ \t]*$", re.MULTILINE).search(block, head.end())
    if close is None:
        close = re.compile(rf'(?:{_STRING}|[^"}}])*\}}').match(block, head.end())
    return (head.start(), close.end()) if close else (head.start(), len(block))


def _scan_value(block: str, key: str) -> str | None:
    """The last value of ``"key":`` in ``block``; a quoted one runs to the line's last quote."""
    found = re.findall(
        rf'^[ \t]*"{re.escape(key)}"[ \t]*:[ \t]*("[^\n]*"|[^,\n]*)', block, re.MULTILINE)
    if not found:
        return None
    raw = str(found[-1]).strip()
    if not raw.startswith('"'):
        return raw
    try:
        return str(json.loads(raw))
    except ValueError:
        inner = raw[1:-1] if len(raw) > 1 and raw.endswith('"') else raw[1:]
        return re.sub(r"\\(.)", r"\1", inner)


def _scan_inside(block: str, name: str, key: str) -> str | None:
    span = _object_text(block, name)
    return _scan_value(block[span[0]: span[1]], key) if span else None


_SCANNED = ("job_state", "Exit_status", "substate", "comment", "Job_Name", "Job_Owner",
            "queue", "exec_host", "stime", "Priority", "Hold_Types")
_SCANNED_INSIDE = (("estimated", "start_time"), ("Resource_List", "walltime"),
                   ("resources_used", "walltime"))


def _scan_job(block: str) -> dict[str, Any]:
    """One job's attributes pulled from its text, when the JSON as a whole cannot be read.

    Its environment is set aside first: that is where the known breakage lives.
    """
    env = _object_text(block, "Variable_List")
    rest = block[: env[0]] + block[env[1]:] if env else block
    attrs: dict[str, Any] = {k: v for k in _SCANNED if (v := _scan_value(rest, k)) is not None}
    attrs["Variable_List"] = {
        "PBS_O_WORKDIR": _scan_inside(block, "Variable_List", "PBS_O_WORKDIR")}
    for group, key in _SCANNED_INSIDE:
        attrs[group] = {key: _scan_inside(rest, group, key)}
    return attrs


def scan_jobs(text: str) -> dict[str, dict[str, Any]]:
    heads = list(_JOB_HEAD.finditer(text))
    ends = [h.start() for h in heads[1:]] + [len(text)]
    return {h.group(1): _scan_job(text[h.end(): e]) for h, e in zip(heads, ends)}


# qstat's -a table: a "Job ID" heading over a rule of dashes, then one row per job.
_TABLE_RULE = re.compile(r"^-{3,}(?: +-+)+ *$", re.MULTILINE)
_TABLE_ROW = re.compile(r"^\d+(?:\[\d*\])?(?:\.\S*)? +\S", re.MULTILINE)


def table_instead_of_jobs(text: str) -> bool:
    """Whether qstat printed its text table of jobs and then JSON without them: OpenPBS 23.06
    does that for ``qstat -f -F json -u USER`` (exit 0; fixed after 23.06, openpbs #2676)."""
    first = re.search(r"^\{", text, re.MULTILINE)
    before = text[: first.start()] if first else text
    rule = _TABLE_RULE.search(before)
    return bool(rule and _TABLE_ROW.search(before, rule.end())
                and not _JOB_HEAD.search(text, first.start() if first else len(text)))


def job_ids(text: str) -> set[str]:
    """The job ids that open a job's object in the text, readable or not."""
    return {m.group(1) for m in _JOB_HEAD.finditer(text)}
