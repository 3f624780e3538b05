"""The one place that runs scheduler commands."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcdet.errors import SchedulerCommandError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Result:
    stdout: str
    stderr: str
    exit_code: int


class CommandRunner:
    """Runs command lists locally; counts calls per program (tests assert on the load)."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.calls: dict[str, int] = {}

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        """``cwd``: where it runs (qsub records its own as the job's PBS_O_WORKDIR)."""
        prog = cmd[0].rsplit("/", 1)[-1]
        self.calls[prog] = self.calls.get(prog, 0) + 1
        log.debug("running %s", cmd)
        try:
            p = subprocess.run(
                list(cmd), capture_output=True, text=True, timeout=self.timeout, input=stdin,
                cwd=cwd,
            )
        except FileNotFoundError as e:
            raise SchedulerCommandError(cmd, 127, "", f"{cmd[0]}: command not found") from e
        except subprocess.TimeoutExpired as e:
            raise SchedulerCommandError(
                cmd, 124, "", f"timed out after {self.timeout} s", transient=True
            ) from e
        if check and p.returncode != 0:
            raise SchedulerCommandError(cmd, p.returncode, p.stdout, p.stderr)
        return Result(p.stdout, p.stderr, p.returncode)
