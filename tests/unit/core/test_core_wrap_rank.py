"""wrap_rank: argument parsing and line prefixing as data, then the real program."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from hpcdet.errors import UsageError
from hpcdet.launch.wrap_rank import (
    LinePrefixer,
    RankError,
    WrapArgs,
    build_command,
    parse_args,
    resolve_rank,
)

WRAP = [sys.executable, "-m", "hpcdet.launch.wrap_rank"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["3", "--", "python3", "x.py"], WrapArgs("3", ["python3", "x.py"])),
        (["3", "python3", "x.py", "--", "a"], WrapArgs("3", ["python3", "x.py", "--", "a"])),
        (["--no-redirect-stdio", "RANK", "--", "cmd", "--flag"],
         WrapArgs("RANK", ["cmd", "--flag"], redirect_stdio=False)),
    ],
)
def test_parse_args(argv: list[str], expected: WrapArgs) -> None:
    assert parse_args(argv) == expected
    assert build_command(parse_args(argv)) == expected.script


@pytest.mark.parametrize(
    ("argv", "message"),
    [([], "RANK is required"), (["3"], "empty script is not allowed"),
     (["3", "--"], "empty script is not allowed"), (["--bogus", "3", "x"], "unknown option")],
)
def test_parse_args_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_args(argv)


def test_resolve_rank() -> None:
    assert resolve_rank("4", {}) == 4
    env = {"OMPI_COMM_WORLD_RANK": "2", "PMI_RANK": "9"}
    assert resolve_rank("HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK", env) == 2
    with pytest.raises(RankError, match="none of the rank variables RANK, PMI_RANK is set"):
        resolve_rank("RANK,PMI_RANK", {})
    with pytest.raises(RankError, match="is not an integer"):
        resolve_rank("RANK", {"RANK": "zero"})


def test_line_prefixer() -> None:
    p = LinePrefixer(2)
    assert p.feed(b"a\nb") == b"[rank=2] a\n"
    assert p.feed(b"c\r\nd\re\r") == b"[rank=2] bc\r\n[rank=2] d\r"
    assert p.feed(b"\nf") == b"[rank=2] e\r\n"
    assert p.finish() == b"[rank=2] f"
    assert p.finish() == b""


def test_line_prefixer_cuts_long_lines() -> None:
    p = LinePrefixer(0, max_line=4)
    assert p.feed(b"abcdefghij\n") == b"[rank=0] abcd[rank=0] efgh[rank=0] ij\n"


def test_prefixes_both_streams_and_returns_the_exit_code() -> None:
    script = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    proc = subprocess.run(
        [*WRAP, "5", "--", sys.executable, "-c", script], capture_output=True, text=True
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "[rank=5] out\n", "[rank=5] err\n")


def test_rank_from_the_environment() -> None:
    env = {**os.environ, "PMI_RANK": "7"}
    proc = subprocess.run(
        [*WRAP, "RANK,PMI_RANK", "echo", "hi"], capture_output=True, text=True, env=env
    )
    assert (proc.returncode, proc.stdout) == (0, "[rank=7] hi\n")


def test_no_rank_variable_set_exits_1() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RANK"}
    proc = subprocess.run([*WRAP, "RANK", "echo", "hi"], capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert "none of the rank variables RANK is set" in proc.stderr
    assert proc.stdout == ""


def test_signals_are_forwarded_to_the_script() -> None:
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(42))\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.Popen(
        [*WRAP, "0", "--", sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    # The script's handler is in place once it has printed, and the wrapper's before it ran.
    assert proc.stdout.readline() == "[rank=0] ready\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 42


def test_a_script_killed_by_a_signal_exits_128_plus_n() -> None:
    proc = subprocess.run([*WRAP, "0", "sh", "-c", "kill -KILL $$"], capture_output=True)
    assert proc.returncode == 128 + signal.SIGKILL
