"""The CLI's console prints text to a pipe as rich would, without importing rich."""

from __future__ import annotations

import io
import random
import sys

import pytest
from rich.console import Console

from hpcdet.cli.common import console, visible

TRICKY = ["plain", "  lead and trail  ", "x" * 500, "[bold]markup[/bold] :x: :smile:",
          "wide 日本語 " * 40, "emoji 😀 " * 50, "e\u0301 zw\u200bj", "multi\nline\n", "\n", "",
          "trailing\n\n", "a\x1bb\rc\x07", "bidi \u202e", "line sep \u2028 para \u2029 nel \x85",
          "crlf\r\n", "form\x0cfeed vt\x0b", "[/oops]", "back\\slash"]


def _rich(*shown: str) -> str:
    out = io.StringIO()
    Console(file=out, highlight=False, markup=False, emoji=False, soft_wrap=True,
            width=200).print(*shown)
    return out.getvalue()


def _ours(capsys: pytest.CaptureFixture[str], *objects: str, **kwargs: bool) -> str:
    console.print(*objects, **kwargs)
    return capsys.readouterr().out


def test_plain_text_is_printed_as_rich_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    rnd = random.Random(7)
    alphabet = "ab []:\n\u00e9\u65e5\U0001F600\u0301\u200b\u2028\x85\x1b\r\\/*_`#"
    samples = TRICKY + ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 250)))
                        for _ in range(300)]
    for text in samples:
        shown = visible(text, keep_lines=True)
        assert console.plain([shown], {"markup": False})
        assert _ours(capsys, text, markup=False) == _rich(shown), repr(text)
    assert _ours(capsys, "a", "b") == _rich("a", "b")
    assert _ours(capsys) == _rich()


def test_what_rich_changes_goes_through_rich(capsys: pytest.CaptureFixture[str]) -> None:
    assert not console.plain(["tab\there"], {})  # rich expands tabs
    assert not console.plain(["x"], {"markup": True})
    assert not console.plain(["x"], {"style": "bold"})
    assert _ours(capsys, "tab\there") == _rich("tab\there")


def test_the_console_does_not_import_rich_for_plain_text() -> None:
    import subprocess

    program = ("import sys\nfrom hpcdet.cli.common import console\nconsole.print('a [b]')\n"
               "print('rich' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          check=True)
    assert done.stdout == "a [b]\nFalse\n"
