"""The harness's watch over its node's GPUs: a thread that samples ``nvidia-smi`` (or
``rocm-smi``) every few seconds and, when a GPU of the trial stays at 0% utilization past a
threshold, says so in the trial's log and in the run tree (``hpcdet.rundir.gpu_idle``) for
`describe` and the web UI, before a site's idle-GPU reaper acts (Princeton's and BU's cancel
jobs whose GPUs idle for 2 hours). A node without either tool has no watch and no noise.

Set by the trial's environment (``environment.environment_variables``):
``HPCDET_GPU_IDLE_SECONDS`` (the threshold, 1800 by default; 0 turns the watch off) and
``HPCDET_GPU_SAMPLE_SECONDS`` (60 by default).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hpcdet.rundir import gpu_idle

IDLE_ENV = "HPCDET_GPU_IDLE_SECONDS"
SAMPLE_ENV = "HPCDET_GPU_SAMPLE_SECONDS"
DEFAULT_IDLE = 1800.0
DEFAULT_SAMPLE = 60.0
# nvidia-smi(1), --query-gpu: one line per GPU, its values comma-separated in the order asked.
NVIDIA_QUERY = ["nvidia-smi", "--query-gpu=index,uuid,utilization.gpu,memory.used",
                "--format=csv,noheader,nounits"]
ROCM_QUERY = ["rocm-smi", "--showuse", "--csv"]
QUERY_TIMEOUT = 30.0


@dataclass(frozen=True)
class GpuSample:
    index: int
    uuid: str
    utilization: float | None  # percent; None where the tool says it cannot tell
    memory_mib: float | None = None


def _number(text: str) -> float | None:
    try:
        return float(text.strip().rstrip("%"))
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def parse_nvidia_smi(text: str) -> list[GpuSample]:
    """``0, GPU-1b2c..., 37, 1024`` per line (index, uuid, utilization %, memory MiB)."""
    found = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        found.append(GpuSample(int(parts[0]), parts[1], _number(parts[2]),
                               _number(parts[3]) if len(parts) > 3 else None))
    return found


def parse_rocm_smi(text: str) -> list[GpuSample]:
    """``device,GPU use (%)`` then ``card0,0`` per GPU."""
    lines = [line.split(",") for line in text.splitlines() if "," in line]
    if not lines:
        return []
    header = [h.strip().lower() for h in lines[0]]
    use = next((i for i, h in enumerate(header) if h.startswith("gpu use")), None)
    if use is None:
        return []
    found = []
    for row in lines[1:]:
        card = row[0].strip().removeprefix("card")
        if card.isdigit() and use < len(row):
            found.append(GpuSample(int(card), "", _number(row[use])))
    return found


def visible(samples: list[GpuSample], env: Mapping[str, str]) -> list[GpuSample]:
    """The trial's GPUs: those ``CUDA_VISIBLE_DEVICES`` (or ROCm's ``ROCR_VISIBLE_DEVICES``,
    ``HIP_VISIBLE_DEVICES``) names, by index or UUID; every one where none is set."""
    for name in ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        listed = env.get(name)
        if listed is not None:
            wanted = {item.strip() for item in listed.split(",") if item.strip()}
            return [s for s in samples if str(s.index) in wanted or (s.uuid and s.uuid in wanted)]
    return samples


class IdleTracker:
    """Since when each GPU has been at 0%, and which have passed the threshold."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.since: dict[int, float] = {}
        self.uuids: dict[int, str] = {}
        self.warned: set[int] = set()

    def update(self, samples: list[GpuSample], now: float) -> list[GpuSample]:
        """The GPUs that passed the threshold with this sample (each once per idle stretch)."""
        newly = []
        for s in samples:
            if s.utilization is None:
                continue
            self.uuids[s.index] = s.uuid
            if s.utilization > 0:
                self.since.pop(s.index, None)
                self.warned.discard(s.index)
                continue
            started = self.since.setdefault(s.index, now)
            if now - started >= self.threshold and s.index not in self.warned:
                self.warned.add(s.index)
                newly.append(s)
        return newly

    def idle(self) -> dict[int, float]:
        """The GPUs past the threshold now, with since when they idle."""
        return {i: self.since[i] for i in sorted(self.warned)}


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        return max(0.0, float(env.get(name, default)))
    except ValueError:
        return default


class GpuWatch:
    """``env``: the trial's (its settings); ``host``: the harness's own, whose
    ``CUDA_VISIBLE_DEVICES`` the scheduler set (a container's is renumbered from 0)."""

    def __init__(self, run_dir: Path, rank: int, env: Mapping[str, str],
                 say: Callable[[str], None],
                 sampler: tuple[list[str], Callable[[str], list[GpuSample]]],
                 host: Mapping[str, str]) -> None:
        self.run_dir, self.rank, self.env, self.say, self.host = run_dir, rank, env, say, host
        self.command, self.parse = sampler
        self.tracker = IdleTracker(_seconds(env, IDLE_ENV, DEFAULT_IDLE))
        self.interval = max(0.1, _seconds(env, SAMPLE_ENV, DEFAULT_SAMPLE))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hpcdet-gpu-watch", daemon=True)
        self._failed = False

    def start(self) -> GpuWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=QUERY_TIMEOUT + 1)

    def sample(self, now: float) -> None:
        try:
            done = subprocess.run(self.command, capture_output=True, text=True,
                                  timeout=QUERY_TIMEOUT, check=True, env=dict(self.env))
        except (OSError, subprocess.SubprocessError) as e:
            if not self._failed:  # said once: a tool that fails keeps failing
                self.say(f"GPU watch: {self.command[0]} failed ({e}); the watch goes on")
            self._failed = True
            return
        before = self.tracker.idle()
        for gpu in self.tracker.update(visible(self.parse(done.stdout), self.host), now):
            self.say(
                f"warning: GPU {gpu.index}{f' ({gpu.uuid})' if gpu.uuid else ''} has been idle "
                f"(0% utilization) for {(now - self.tracker.since[gpu.index]) / 60:.0f} min; "
                "sites whose reapers cancel jobs with idle GPUs (after 2 hours at Princeton "
                "and BU) may end this job: check that the trial uses its GPUs")
        if self.tracker.idle() != before:
            gpu_idle.write(self.run_dir, self.rank, {
                "host": socket.gethostname(), "threshold": self.tracker.threshold,
                "time": time.time(),
                "gpus": [{"index": i, "uuid": self.tracker.uuids.get(i, ""), "idle_since": since}
                         for i, since in self.tracker.idle().items()]})

    def _loop(self) -> None:
        while True:
            self.sample(time.time())
            if self._stop.wait(self.interval):
                return


def start(run_dir: Path, rank: int, env: Mapping[str, str], say: Callable[[str], None],
          host: Mapping[str, str] | None = None) -> GpuWatch | None:
    """A started watch over this node's GPUs, or None: no nvidia-smi or rocm-smi on the
    trial's PATH, or the watch turned off (``HPCDET_GPU_IDLE_SECONDS=0``)."""
    if _seconds(env, IDLE_ENV, DEFAULT_IDLE) <= 0:
        return None
    sampler = query(env.get("PATH", os.defpath))
    if sampler is None:
        return None
    return GpuWatch(run_dir, rank, env, say, sampler,
                    os.environ if host is None else host).start()


def query(path: str) -> tuple[list[str], Callable[[str], list[GpuSample]]] | None:
    """The sampling command found on ``path`` and its parser; None without either tool."""
    for command, parse in ((NVIDIA_QUERY, parse_nvidia_smi), (ROCM_QUERY, parse_rocm_smi)):
        found = shutil.which(command[0], path=path)
        if found:
            return [found, *command[1:]], parse
    return None
