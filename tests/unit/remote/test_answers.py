"""Keyboard-interactive answers on the laptop: $HPCDET_ASKPASS, or a clear error without a
terminal (never a code read from, or written to, anywhere else)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcdet.remote import session, wire


def test_askpass_answers_each_prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = tmp_path / "asked"
    askpass = tmp_path / "askpass"
    askpass.write_text(f'#!/bin/sh\necho "$1" >> {asked}\necho 654321\n')
    askpass.chmod(0o700)
    monkeypatch.setenv(session.ENV_ASKPASS, str(askpass))
    assert session.answer("t", "i", [("Code: ", False), ("Again: ", True)]) == [
        "654321", "654321"]
    assert asked.read_text() == "Code: \nAgain: \n"
    askpass.write_text("#!/bin/sh\nexit 3\n")
    with pytest.raises(wire.RemoteError, match="failed for 'Code: ' with exit code 3"):
        session.answer("", "", [("Code: ", False)])


def test_no_terminal_and_no_askpass_is_a_clear_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != session.ENV_ASKPASS}
    done = subprocess.run(
        [sys.executable, "-c", "from hpcdet.remote.session import answer\n"
         "try:\n    answer('', '', [('Code: ', False)])\n"
         "except Exception as e:\n    print(type(e).__name__, e)\n"],
        env=env, capture_output=True, text=True, start_new_session=True, timeout=60,
        stdin=subprocess.DEVNULL)
    assert done.stdout.startswith("RemoteError the login node asks for a second factor")
    assert "HPCDET_ASKPASS" in done.stdout
