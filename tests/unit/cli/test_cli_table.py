"""docs/cli.md is what scripts/cli_table.py writes from det's parser and hpcdet's CLI, and
every det command and option of the daily groups has an hpcdet equivalent or a reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_command_table_is_current_and_explains_every_gap() -> None:
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "cli_table.py")],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout == (ROOT / "docs" / "cli.md").read_text(), (
        "docs/cli.md is out of date: python scripts/cli_table.py > docs/cli.md")
    assert "| `experiment set max-slots` |  | yes |" in p.stdout
