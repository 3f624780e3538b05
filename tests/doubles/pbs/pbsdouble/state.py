"""The double's home directory, its config.json, and the locked JSON queue state."""

from __future__ import annotations

import fcntl
import json
import os
import sys

from .errors import eprint

PBS_VERSION = "23.06.06"
# The package directory; bin/ is beside it.  A job's runner is started as
# `python3 <PACKAGE_DIR>/__main__.py _runner <seq> <index|"">`.
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
RUNNER_PATH = os.path.join(PACKAGE_DIR, "__main__.py")
BIN_DIR = os.path.join(os.path.dirname(PACKAGE_DIR), "bin")

DEFAULT_CONFIG: dict = {
    "server": "pbsdouble",
    "hosts": [
        {"name": "pbs-a", "ncpus": 4, "ngpus": 0},
        {"name": "pbs-b", "ncpus": 4, "ngpus": 0},
    ],
    "queues": {"workq": {}, "gpuq": {}, "closedq": {"acl_users": ["nobody"]}},
    "default_queue": "workq",
    # pbs_queue_attributes.7B kill_delay: seconds between SIGTERM and SIGKILL (qdel.1B).
    "kill_delay": 2,
    # The MoM's walltime checks, seconds apart (min_check_poll's default; max_check_poll 120).
    "check_poll": 10,
    # pbs_server_attributes.7B acl_roots: root's jobs are refused unless it is listed.
    "acl_roots": [],
    # pbs_server_attributes.7B max_array_size (OpenPBS default 10000).
    "max_array_size": 10000,
    # pbs_server_attributes.7B job_history_enable; qstat.1B -x needs it to show finished jobs.
    "job_history_enable": True,
    # A fresh OpenPBS server numbers its first job 0 (e.g. "0.<server>").
    "first_job_id": 0,
    # src/cmds/pbsdsh.c main() returns 0 even when tasks fail; set True to make the double's
    # pbsdsh exit 1 when any task failed (NOT what OpenPBS does).
    "pbsdsh_fail_exit": False,
}


# ---------------------------------------------------------------------------------------------
# Home, config, state.
# ---------------------------------------------------------------------------------------------


def double_home(cmd: str) -> str:
    home = os.environ.get("PBS_DOUBLE_HOME")
    if not home:
        eprint(f"{cmd}: PBS_DOUBLE_HOME is not set; this {cmd} is pbsdouble, a test double of "
               "an OpenPBS server, and keeps its queue in $PBS_DOUBLE_HOME (see "
               "tests/doubles/pbs/README.md)")
        sys.exit(1)
    os.makedirs(home, exist_ok=True)
    return os.path.abspath(home)


def load_config(home: str) -> dict:
    cfg = json.loads(json.dumps(DEFAULT_CONFIG))
    path = os.path.join(home, "config.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            cfg.update(json.load(f))
    return cfg


class Store:
    """The queue state under an exclusive flock, written back atomically if dirty."""

    def __init__(self, home: str, cfg: dict) -> None:
        self.home = home
        self.cfg = cfg
        self.path = os.path.join(home, "state.json")
        self.dirty = False
        self.fd = -1
        self.st: dict = {}

    def __enter__(self) -> Store:
        # Python fds are close-on-exec, so runners started while we hold the lock never
        # inherit it.
        self.fd = os.open(os.path.join(self.home, "state.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            with open(self.path, encoding="utf-8") as f:
                self.st = json.load(f)
        except FileNotFoundError:
            self.st = {"next_seq": int(self.cfg.get("first_job_id", 0)), "order": [], "jobs": {}}
            self.dirty = True
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if self.dirty and exc_type is None:
                tmp = f"{self.path}.{os.getpid()}.tmp"
                with open(tmp, "w", encoding="utf-8") as f:
                    json.dump(self.st, f, separators=(",", ":"))
                os.replace(tmp, self.path)
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)

    @property
    def jobs(self) -> dict:
        return self.st["jobs"]
