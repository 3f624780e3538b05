"""Command-line words: getopt, directive splitting, comma lists, quotes."""

from __future__ import annotations

from .errors import UsageError

# ---------------------------------------------------------------------------------------------
# Command lines and directive lines.
# ---------------------------------------------------------------------------------------------


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
