"""The scheduler contract (tests/backend_contract.py) on the local backend and the PBS double;
tests/cluster/test_backend_contract.py runs it on the real Slurm."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from hpcdet.schedulers import make_scheduler, scheduler_class
from hpcdet.schedulers.runner import CommandRunner
from tests.backend_contract import CONTRACT, Backend

DOUBLE_BIN = Path(__file__).parents[1] / "doubles" / "pbs" / "bin"


def _backend(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Backend:
    if name == "pbs":
        home = tmp_path / "pbs-server"
        home.mkdir()
        (home / "config.json").write_text(json.dumps({"kill_delay": 1, "acl_roots": ["root"]}))
        monkeypatch.setenv("PBS_DOUBLE_HOME", str(home))
        monkeypatch.setenv("PATH", f"{DOUBLE_BIN}{os.pathsep}{os.environ['PATH']}")
    scheduler = make_scheduler(name, {"jobs_dir": str(tmp_path / "local-jobs")})
    return Backend(scheduler, CommandRunner(), tmp_path)


# The local backend runs searches as single jobs: it has no array to check.
CASES = [(name, check) for name in ("local", "pbs") for check in CONTRACT
         if scheduler_class(name).supports_arrays or not check.__name__.startswith("an_array")]


@pytest.mark.parametrize(("name", "check"), CASES,
                         ids=[f"{n}-{c.__name__}" for n, c in CASES])
def test_contract(name: str, check: Callable[[Backend], None], tmp_path: Path,
                  monkeypatch: pytest.MonkeyPatch) -> None:
    check(_backend(name, tmp_path, monkeypatch))
