"""Trial-side code runs in the user's interpreter or image: it imports the standard library
only, and not even its optional extensions (``_sqlite3`` is often missing from a cluster's
self-built Python or a slim image)."""

from __future__ import annotations

import json
import subprocess
import sys

TRIAL_SIDE = [
    "hpcdet.core", "hpcdet.launch.harness", "hpcdet.launch.wrap_rank",
    "hpcdet.launch.torch_distributed", "hpcdet.launch.mpi", "hpcdet.launch.deepspeed",
]
NOT_ALLOWED = ["sqlite3", "_sqlite3", "sqlmodel", "sqlalchemy", "jinja2", "yaml", "typer",
               "rich", "pathspec", "pydantic"]


def test_trial_side_modules_import_nothing_but_the_standard_library() -> None:
    code = (
        "import importlib, json, sys\n"
        f"for m in {TRIAL_SIDE!r}: importlib.import_module(m)\n"
        f"print(json.dumps(sorted(n for n in {NOT_ALLOWED!r} if n in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == []
