"""A pilot allocation of a packed search: ``python -m hpcdet.launch.pilot PILOT_DIR JOB SLOTS
DEADLINE_AFTER``, the one process of a job that holds SLOTS slots on one node.

The daemon hands it runs by writing ``take/<E>.<T>.<R>`` (the run directory inside) in
PILOT_DIR; the pilot starts each run's own harness, as a job of its own would, on slots of its
own (``CUDA_VISIBLE_DEVICES`` for GPUs, a CPU affinity for CPUs), and writes the run's exit
file and rings the daemon's bell when it ends, as the batch script does. ``RUN_DIR/kill``
ends one run (the daemon cancels a run so, never the allocation). Near the walltime, or on
the batch system's warning signal, every run is asked to checkpoint and exit, and the pilot
takes no more: the daemon hands what is left to another allocation. It ends once idle with
``closed`` written, or at the walltime.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpcdet.node_env import DEADLINE_VAR
from hpcdet.private import hpcdet_command
from hpcdet.rundir.atomic import read_json, write_atomic
from hpcdet.rundir.layout import (
    EXIT_FILE,
    KILL_FILE,
    PILOT_STATUS,
    PILOT_TAKE,
    PREEMPT_FILE,
    bell,
    packed_id,
)
from hpcdet.rundir.spec import RunSpec

HARNESS = "hpcdet.launch.harness"
CLOSED = "closed"  # the experiment's arrays' (hpcdet.rundir.layout.array_closed)
LOOK = 0.2  # seconds between looks for work: an array task waits for its slot as often
# Seconds between status writes when nothing changes: the daemon counts a pilot silent for a
# minute as gone, and the shared filesystem is spared five writes a second.
BEAT = 10.0


@dataclass
class Running:
    run_dir: Path
    slots: list[int]
    process: subprocess.Popen[bytes]
    job_id: str


@dataclass
class Pilot:
    directory: Path
    job_id: str
    slots: int
    deadline: float | None
    free: list[int] = field(default_factory=list)
    running: dict[str, Running] = field(default_factory=dict)
    draining: bool = False
    cpus: list[int] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    said: tuple[object, ...] = ()  # what the last status write said
    said_at: float = 0.0

    def __post_init__(self) -> None:
        self.free = list(range(self.slots))
        self.cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        self.gpus = [g for g in visible.split(",") if g] if visible else []
        (self.directory / PILOT_TAKE).mkdir(exist_ok=True)

    def status(self) -> None:
        now = (tuple(sorted(self.running)), self.draining, len(self.free))
        if now == self.said and time.time() - self.said_at < BEAT:
            return
        self.said, self.said_at = now, time.time()
        write_atomic(self.directory / PILOT_STATUS, {
            "job_id": self.job_id, "host": os.uname().nodename, "slots": self.slots,
            "free": len(self.free), "draining": self.draining, "beat": time.time(),
            "running": sorted(self.running)}, durable=False)

    def start(self, key: str, run_dir: Path) -> None:
        spec = RunSpec.load(run_dir)
        need = max(1, spec.slots_per_node)
        if len(self.free) < need or self.draining:
            return  # the daemon hands out no more than fit; a later look finds room
        slots, self.free = self.free[:need], self.free[need:]
        env = dict(os.environ)
        if self.deadline is not None:
            env[DEADLINE_VAR] = str(self.deadline)
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus[s % len(self.gpus)] for s in slots)
        cpus = {self.cpus[s % len(self.cpus)] for s in slots} if self.cpus else set()
        # Trials sharing the allocation share its job id; the run keys their ports apart.
        env["HPCDET_PORT_KEY"] = key
        job_id = packed_id(self.job_id, spec.experiment_id, spec.trial_id, spec.run_id)
        with open(run_dir / "scheduler.out", "ab") as out:
            process = subprocess.Popen(
                hpcdet_command(HARNESS, sys.executable) + [str(run_dir)], env=env, cwd=run_dir,
                stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        self.running[key] = Running(run_dir, slots, process, job_id)
        print(f"pilot: run {key} on slots {slots}", flush=True)

    def reap(self) -> None:
        for key, run in list(self.running.items()):
            if (run.run_dir / KILL_FILE).exists() and run.process.poll() is None:
                run.process.kill()
            code = run.process.poll()
            if code is None:
                continue
            # As the batch script writes it: the daemon reads a run's end from here.
            write_atomic(run.run_dir / EXIT_FILE, {"exit_code": code if code >= 0 else 128 - code,
                                                   "job_id": run.job_id, "ended": time.time()})
            try:
                bell(run.run_dir).touch()
            except OSError:
                pass  # a ring lost costs only the wait for the daemon's next sweep
            self.free = sorted(self.free + run.slots)
            del self.running[key]
            print(f"pilot: run {key} ended with {code}", flush=True)

    def drain(self, why: str) -> None:
        """Ask every run to checkpoint and exit, and take no more."""
        if not self.draining:
            print(f"pilot: {why}; asking {len(self.running)} run(s) to checkpoint", flush=True)
        self.draining = True
        for run in self.running.values():
            (run.run_dir / PREEMPT_FILE).touch()

    def look(self) -> None:
        taken = self.directory / PILOT_TAKE
        for entry in sorted(taken.iterdir(), key=lambda p: p.stat().st_mtime):
            if entry.name.startswith(".") or entry.name in self.running:
                continue
            run_dir = Path(entry.read_text().strip())
            if read_json(run_dir / EXIT_FILE) is None:
                self.start(entry.name, run_dir)
            if entry.name in self.running:
                entry.unlink()

    def loop(self) -> int:
        while True:
            self.reap()
            if self.deadline is not None and time.time() >= self.deadline:
                self.drain("the allocation's walltime is near")
            if not self.draining:
                self.look()
            self.status()
            idle = not self.running
            # The experiment's arrays' closed file: no trial will be handed out any more.
            if idle and (self.draining or (self.directory.parent / CLOSED).exists()):
                return 0
            time.sleep(LOOK)


def main(argv: list[str]) -> int:
    directory, job_id, slots, after = Path(argv[0]), argv[1], int(argv[2]), int(argv[3])
    pilot = Pilot(directory, job_id, slots, time.time() + after if after > 0 else None)
    for signum in (signal.SIGUSR2, signal.SIGTERM):
        signal.signal(signum, lambda s, f: pilot.drain(f"signal {s}"))
    print(f"pilot: job {job_id} holds {slots} slot(s) on {os.uname().nodename}", flush=True)
    try:
        return pilot.loop()
    finally:
        write_atomic(directory / PILOT_STATUS, {**(read_json(directory / PILOT_STATUS) or {}),
                                          "ended": time.time()}, durable=False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
