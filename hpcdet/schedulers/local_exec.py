"""A tiny batch system for one machine, behind the same command-line shape as sbatch/squeue.

``python -m hpcdet.schedulers.local_exec submit|status|cancel JOBS_DIR ...``. Each job runs its
script under a detached supervisor that records the final state in ``JOBS_DIR/<id>.json``, so
jobs outlive the daemon just as batch jobs do. Cancel follows scancel: SIGTERM to the job's
processes, SIGKILL after a grace period (Slurm's KillWait).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hpcdet.private import hpcdet_command, open_private, private_dir, tighten_umask
from hpcdet.processes import pid_alive
from hpcdet.rundir.atomic import write_text_atomic

KILL_WAIT = 5.0
NAME_MARK = "# job-name: "


def _write(path: Path, data: dict[str, object]) -> None:
    write_text_atomic(path, json.dumps(data), mode=0o600)


def _next_id(jobs: Path) -> int:
    # The daemon's alone, also in a state directory shared with a group: a member holding a
    # lock on the counter would hold up every submission (issue 37).
    private_dir(jobs)
    with os.fdopen(open_private(jobs / "counter"), "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        current = int(f.read().strip() or "0") + 1
        f.seek(0)
        f.truncate()
        f.write(str(current))
    return current


def submit(jobs: Path, script: Path) -> int:
    job_id = _next_id(jobs)
    _write(jobs / f"{job_id}.json", {"state": "PENDING", "name": _job_name(script)})
    out = open(script.parent / "scheduler.out", "ab")
    subprocess.Popen(
        [*hpcdet_command("hpcdet.schedulers.local_exec"), "supervise", str(jobs),
         str(job_id), str(script)],
        stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
    )
    return job_id


def supervise(jobs: Path, job_id: int, script: Path) -> int:
    record = jobs / f"{job_id}.json"
    env = dict(os.environ, HPCDET_LOCAL_JOB_ID=str(job_id))
    child = subprocess.Popen(["bash", str(script)], env=env, start_new_session=True,
                             cwd=script.parent)
    name = _job_name(script)
    _write(record, {"state": "RUNNING", "pgid": child.pid, "name": name})
    cancel = jobs / f"{job_id}.cancel"
    cancelled_at: float | None = None
    while True:
        try:
            rc = child.wait(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            pass
        if cancelled_at is None and cancel.exists():
            cancelled_at = time.time()
        if cancelled_at is not None and time.time() - cancelled_at > KILL_WAIT:
            _killpg(child.pid, signal.SIGKILL)
    if cancel.exists():
        state = "CANCELLED"
    else:
        state = "COMPLETED" if rc == 0 else "FAILED"
    _write(record, {"state": state, "exit_code": rc, "name": name})
    return 0


def _job_name(script: Path) -> str:
    for line in script.read_text().splitlines()[:5]:
        if line.startswith(NAME_MARK):
            return line[len(NAME_MARK):].strip()
    return script.parent.name


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def status(jobs: Path) -> str:
    lines = []
    for path in sorted(jobs.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        state = data["state"]
        if state in ("PENDING", "RUNNING") and "pgid" in data and not pid_alive(data["pgid"]):
            state = "NODE_FAIL"  # the supervisor vanished (machine rebooted, killed)
        name = data.get("name", "")
        lines.append(f"{path.stem}|{state}|{data.get('exit_code', '')}|{name}")
    return "\n".join(lines) + ("\n" if lines else "")


def cancel(jobs: Path, job_ids: list[str]) -> None:
    for job_id in job_ids:
        record = jobs / f"{job_id}.json"
        if not record.exists():
            continue
        os.close(open_private(jobs / f"{job_id}.cancel"))
        data = json.loads(record.read_text())
        if "pgid" in data:
            _killpg(int(data["pgid"]), signal.SIGTERM)


def main(argv: list[str]) -> int:
    tighten_umask()
    cmd, jobs = argv[0], Path(argv[1])
    if cmd == "submit":
        print(submit(jobs, Path(argv[2]).absolute()))
    elif cmd == "supervise":
        return supervise(jobs, int(argv[2]), Path(argv[3]))
    elif cmd == "status":
        sys.stdout.write(status(jobs))
    elif cmd == "cancel":
        cancel(jobs, argv[2:])
    else:
        print(f"unknown command {cmd}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
