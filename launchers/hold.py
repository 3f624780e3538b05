"""The allocation of `hpcdet shell start`: ``python3 -m hpcdet.launch.hold``, run by the
harness as a trial's entrypoint. It writes the trial's environment and working directory
as bash sources them (``hpcdet.rundir.layout.shell_rc``), then holds the allocation until the
task is killed or its walltime ends; `hpcdet shell open` starts shells in it with that file.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
from pathlib import Path

from hpcdet.rundir.atomic import write_text_atomic
from hpcdet.rundir.layout import shell_rc
from hpcdet.rundir.spec import RUN_DIR_ENV

# The step's own variables: a shell started later is a step of its own, with its own.
_STEP_PREFIXES = ("SLURM_STEP", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_TASK_PID", "PMI_",
                  "SLURM_PTY", "SLURM_SRUN")
_NOT_KEPT = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "PS1", "TERM", "COLUMNS", "LINES"})


def rc_text(environ: dict[str, str], cwd: str) -> str:
    """bash lines that set ``environ`` (every value quoted) and enter ``cwd``."""
    lines = ["# written by hpcdet.launch.hold: the task's environment"]
    for key, value in sorted(environ.items()):
        if key in _NOT_KEPT or key.startswith(_STEP_PREFIXES) or not key.isidentifier():
            continue
        lines.append(f"export {key}={shlex.quote(value)}")
    lines.append(f"cd {shlex.quote(cwd)}")
    lines.append(r"PS1='[task $DET_EXPERIMENT_ID \h \W]\$ '")
    return "\n".join(lines) + "\n"


def main() -> int:
    run_dir = Path(os.environ[RUN_DIR_ENV])
    write_text_atomic(shell_rc(run_dir), rc_text(dict(os.environ), os.getcwd()), mode=0o600)
    print(f"holding the allocation on {os.uname().nodename} for shells "
          f"(`hpcdet shell open {os.environ.get('DET_EXPERIMENT_ID', '')}`)", flush=True)
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
