"""The daemon's lease on a state directory: one daemon at a time, on whichever host it runs.

A state directory on a shared filesystem is seen from every login node of a cluster (and from
the compute nodes, where a supervising job may run the daemon). A flock on local disk keeps one
daemon per host; the lease keeps one per state directory:

- Each daemon that starts takes the next *generation*: it creates ``<state>/lease/<N>`` with
  O_EXCL, which one creator alone can do (NFSv3 and later make the create atomic too), and
  writes its host and pid in it. ``daemon.json`` then carries that generation and the holder's
  heartbeat.
- A daemon takes the next generation only when the holder has stopped, runs on this host (the
  caller holds this host's flock, so that one is dead), or has not renewed its heartbeat for the
  lease's length (``daemon_lease`` in the cluster config, 120 s by default).
- The holder, before each renewal, looks for the generation after its own: when another daemon
  has taken it (this one was frozen, or cut off from the filesystem, for longer than the lease),
  it stops at once and writes nothing more.

Heartbeats are compared across hosts' clocks, which NTP keeps far closer than a lease.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcdet.errors import DaemonError
from hpcdet.paths import StatePaths, hostname
from hpcdet.private import open_private, private_dir
from hpcdet.rundir.atomic import read_json, write_atomic

DEFAULT_LEASE = 120.0
# Generations kept in the lease directory besides the newest: the holder of the one before
# looks for the newest to learn it was replaced.
KEEP = 2


def batch_job() -> str:
    """The batch job this process runs in (a supervising job's daemon), or ""."""
    return os.environ.get("SLURM_JOB_ID") or os.environ.get("PBS_JOBID", "")


class LeaseHeld(DaemonError):
    """Another daemon holds the state directory's lease: it serves, this one does not start."""


@dataclass(frozen=True)
class Holder:
    """What ``daemon.json`` says of the daemon that last held the lease."""

    host: str
    pid: int
    generation: int
    heartbeat: float
    running: bool
    lease: float
    job: str  # the batch job it runs in ("" on a login node)

    @classmethod
    def of(cls, record: dict[str, Any]) -> Holder | None:
        if not record.get("host"):
            return None
        return cls(str(record["host"]), int(record.get("pid", 0)),
                   int(record.get("generation", 0)), float(record.get("heartbeat", 0.0)),
                   bool(record.get("running")), float(record.get("lease", DEFAULT_LEASE)),
                   str(record.get("job", "")))

    def expires(self) -> float:
        return self.heartbeat + self.lease

    def live(self, now: float) -> bool:
        """Running, and heard from within its lease (whatever its host says)."""
        return self.running and now < self.expires()

    def where(self) -> str:
        job = f", batch job {self.job}" if self.job else ""
        return f"host {self.host} (pid {self.pid}{job})"


def holder(paths: StatePaths) -> Holder | None:
    try:
        return Holder.of(read_json(paths.daemon_record) or {})
    except ValueError:
        return None  # torn by a crash of its host: the next heartbeat writes it whole


def _claims(paths: StatePaths) -> Path:
    return paths.root / "lease"


def _generations(claims: Path) -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir(claims) if n.isdigit())
    except FileNotFoundError:
        return []


def _claim_of(claims: Path, generation: int) -> dict[str, Any]:
    try:
        got = json.loads((claims / str(generation)).read_text())
    except (OSError, ValueError):
        return {}  # being written, or torn
    return got if isinstance(got, dict) else {}


class Lease:
    """This daemon's generation of the lease (module docstring)."""

    def __init__(self, paths: StatePaths, generation: int, seconds: float, job: str) -> None:
        self.paths = paths
        self.generation = generation
        self.seconds = seconds
        self.job = job
        self.renewed = 0.0

    @classmethod
    def take(cls, paths: StatePaths, seconds: float = DEFAULT_LEASE,
             now: float | None = None) -> Lease:
        """The next generation; raises LeaseHeld, naming the holder, when another daemon has
        the lease. The caller holds this host's daemon lock."""
        now = time.time() if now is None else now
        job = batch_job()
        here = hostname()
        current = holder(paths)
        if current is not None and current.host != here and current.live(now):
            raise LeaseHeld(f"a daemon already serves {paths.root} on {current.where()}; "
                            f"its heartbeat is {now - current.heartbeat:.0f} s old")
        claims = _claims(paths)
        private_dir(claims)
        generations = _generations(claims)
        latest = generations[-1] if generations else 0
        if current is not None and latest > current.generation:
            # Claimed after the last record was written: a daemon is starting there, or died
            # starting. It is given a lease's time to write its first heartbeat.
            claim = _claim_of(claims, latest)
            if claim.get("host") != here and now < float(claim.get("at", 0)) + seconds:
                raise LeaseHeld(f"a daemon is starting for {paths.root} on host "
                                f"{claim.get('host')} (pid {claim.get('pid')})")
        generation = max(latest, current.generation if current else 0) + 1
        try:
            fd = open_private(claims / str(generation), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            claim = _claim_of(claims, generation)
            raise LeaseHeld(f"a daemon has just started for {paths.root} on host "
                            f"{claim.get('host', '?')} (pid {claim.get('pid', '?')})") from None
        with os.fdopen(fd, "w") as f:
            json.dump({"host": here, "pid": os.getpid(), "at": now, "job": job}, f)
        for old in generations:
            if old < generation - KEEP:
                (claims / str(old)).unlink(missing_ok=True)
        return cls(paths, generation, seconds, job)

    def taken_over(self) -> str | None:
        """Who holds the lease now if another daemon took it from this one, else None."""
        claims = _claims(self.paths)
        if not (claims / str(self.generation + 1)).exists():
            return None
        claim = _claim_of(claims, self.generation + 1)
        return f"host {claim.get('host', '?')} (pid {claim.get('pid', '?')})"

    def renew(self, record: dict[str, Any], running: bool = True) -> str | None:
        """Write the heartbeat with ``record`` (where the daemon's database is, its version);
        returns who took the lease over instead, when another daemon has (nothing is written)."""
        thief = self.taken_over()
        if thief is not None:
            return thief
        self.renewed = time.time()
        write_atomic(self.paths.daemon_record, {
            **record, "host": hostname(), "pid": os.getpid(), "generation": self.generation,
            "heartbeat": self.renewed, "lease": self.seconds, "running": running,
            "job": self.job})
        return None
