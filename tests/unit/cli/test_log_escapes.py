"""`hpcdet trial logs` shows a trial's escape sequences visibly (issue 37: they reached the
terminal raw, able to recolour, retitle or rewrite it); --json keeps the text as written."""

from __future__ import annotations

import json

import pytest

from hpcdet.cli.follow import print_records
from hpcdet.views.logs import LogLine, LogRecord

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\rok\tdone \u202eevil"


def test_a_trials_escape_sequences_are_shown_not_obeyed(
    capsys: pytest.CaptureFixture[str]
) -> None:
    record = LogRecord.parse(LogLine("run-1/node-0", f"2026-01-01T00:00:00Z {HOSTILE}"))
    print_records([record])
    out = capsys.readouterr().out
    assert out == ("[2026-01-01T00:00:00Z] [run-1/node-0] || "
                   "\\x1b]0;pwned\\x07\\x1b[2J\\rok\tdone \\u202eevil\n")
    print_records([record], as_json=True)
    assert json.loads(capsys.readouterr().out)["message"] == HOSTILE
