"""``python -m hpcdet.launch.wrap_rank [--no-redirect-stdio] RANK [--] SCRIPT...``

Runs SCRIPT with every line of its stdout and stderr prefixed by ``[rank=N] ``, so that one
node log holding several workers' output can be filtered by rank (Determined's log format).
RANK is an integer or a comma-separated list of environment variables tried in order, e.g.
``RANK`` or ``HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK``. SIGINT, SIGTERM, SIGHUP, SIGUSR1
and SIGUSR2 are forwarded to SCRIPT; the exit code is SCRIPT's (128 + N if killed by signal N).

File descriptors SCRIPT's caller passed on stay open in SCRIPT (an MPI rank's ``PMI_FD``).

``--no-redirect-stdio`` is accepted for Determined compatibility and changes nothing: hpcdet's
harness captures each node's output itself, so there are no log files to copy lines into.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from hpcdet.errors import UsageError

from ._launch import RANK_EXITS_ENV, ForwardedSignals, exit_code

USAGE = "usage: python3 -m hpcdet.launch.wrap_rank [--no-redirect-stdio] RANK [--] SCRIPT..."
# Lines longer than this are cut into several prefixed pieces, as Determined does.
MAX_LINE = io.DEFAULT_BUFFER_SIZE - 1
_EOL = re.compile(rb"\r\n|\r|\n")


class RankError(ValueError):
    """RANK names no environment variable that is set to an integer."""


@dataclass(frozen=True)
class WrapArgs:
    """A parsed command line.

    Attributes:
        rank_spec: An integer, or comma-separated environment variable names.
        script: The command to run; never empty.
        redirect_stdio: False with ``--no-redirect-stdio`` (no effect in hpcdet).
    """

    rank_spec: str
    script: list[str]
    redirect_stdio: bool = True


def parse_args(argv: Sequence[str]) -> WrapArgs:
    """Parse ``[--no-redirect-stdio] RANK [--] SCRIPT...``.

    Raises:
        UsageError: Unknown option, or RANK or SCRIPT missing. ``-h``/``--help`` raise it
            with an empty message.
    """
    redirect = True
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "--no-redirect-stdio":
            redirect = False
        elif argv[i] in ("-h", "--help"):
            raise UsageError("")
        else:
            raise UsageError(f"unknown option {argv[i]}")
        i += 1
    if i >= len(argv):
        raise UsageError("RANK is required")
    rank_spec, script = argv[i], list(argv[i + 1 :])
    if script and script[0] == "--":
        script = script[1:]
    if not script:
        raise UsageError("empty script is not allowed")
    return WrapArgs(rank_spec=rank_spec, script=script, redirect_stdio=redirect)


def resolve_rank(rank_spec: str, env: Mapping[str, str]) -> int:
    """The rank: ``rank_spec`` itself if it is an integer, else the first variable set.

    Raises:
        RankError: None of the named variables is set, or the first one set is no integer.
    """
    if rank_spec.isdigit():
        return int(rank_spec)
    names = [n.strip() for n in rank_spec.split(",") if n.strip()]
    for name in names:
        value = env.get(name)
        if value:
            try:
                return int(value)
            except ValueError:
                raise RankError(f"{name}={value!r} is not an integer rank") from None
    raise RankError(
        f"none of the rank variables {', '.join(names) or repr(rank_spec)} is set; pass the "
        "rank as a number or name a variable the launcher sets (e.g. RANK)"
    )


def build_command(args: WrapArgs) -> list[str]:
    """The child's argv: SCRIPT as given (no shell)."""
    return list(args.script)


class LinePrefixer:
    """Cuts a byte stream into lines (``\\n``, ``\\r\\n`` or ``\\r``) and prefixes each one."""

    def __init__(self, rank: int, max_line: int = MAX_LINE) -> None:
        self._prefix = f"[rank={rank}] ".encode()
        self._max = max_line
        self._buf = b""

    def feed(self, data: bytes) -> bytes:
        """Prefixed complete lines of what arrived so far; a partial line waits."""
        buf = self._buf + data
        out: list[bytes] = []
        pos, end = 0, len(buf)
        while pos < end:
            m = _EOL.search(buf, pos, pos + self._max + 2)
            if m is not None and m.start() - pos <= self._max:
                # A lone trailing \r may be the first half of a \r\n still in the pipe.
                if m.group() == b"\r" and m.end() == end:
                    break
                out += (self._prefix, buf[pos : m.end()])
                pos = m.end()
            elif end - pos > self._max:
                out += (self._prefix, buf[pos : pos + self._max])
                pos += self._max
            else:
                break
        self._buf = buf[pos:]
        return b"".join(out)

    def finish(self) -> bytes:
        """The last, unterminated line (prefixed), if any."""
        buf, self._buf = self._buf, b""
        return self._prefix + buf if buf else b""


def _pump(src: BinaryIO, dst: BinaryIO, rank: int) -> None:
    prefixer = LinePrefixer(rank)
    fd = src.fileno()
    while True:
        chunk = os.read(fd, 65536)
        data = prefixer.feed(chunk) if chunk else prefixer.finish()
        if data:
            dst.write(data)
            dst.flush()
        if not chunk:
            return


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as e:
        print(USAGE if not str(e) else f"{USAGE}\nerror: {e}", file=sys.stderr)
        return 0 if not str(e) else 2
    try:
        rank = resolve_rank(args.rank_spec, os.environ)
    except RankError as e:
        print(f"wrap_rank: {e}", file=sys.stderr)
        return 1
    cmd = build_command(args)
    with ForwardedSignals() as signals:
        code = _run(cmd, rank, signals)
    exits = os.environ.get(RANK_EXITS_ENV)
    if exits:
        try:
            with open(os.path.join(exits, str(rank)), "w") as f:
                f.write(f"{code}\n")
        except OSError as e:  # the launcher then does without it
            print(f"wrap_rank: cannot record the exit code in {exits}: {e}", file=sys.stderr)
    return code


def _run(cmd: list[str], rank: int, signals: ForwardedSignals) -> int:
    try:
        # Inherited descriptors stay open: MPI process managers hand each rank its PMI
        # connection as one (PMI_FD). Descriptors Python opens itself are not inheritable.
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=False
        )
    except OSError as e:
        print(f"wrap_rank: cannot run {cmd[0]!r}: {e}", file=sys.stderr)
        return 127
    signals.adopt(proc)
    assert proc.stdout is not None and proc.stderr is not None
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, sys.stdout.buffer, rank)),
        threading.Thread(target=_pump, args=(proc.stderr, sys.stderr.buffer, rank)),
    ]
    for t in pumps:
        t.start()
    code = proc.wait()
    for t in pumps:
        t.join()
    return exit_code(code)


if __name__ == "__main__":
    sys.exit(main())
