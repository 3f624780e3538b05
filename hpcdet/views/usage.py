"""What trials and experiments used: slot-hours (GPU-hours where a trial's slots are GPUs), from
the scheduler's account of each run where it keeps one (sacct, qstat -x) and from the run tree's
times otherwise (when its first node started to when it ended, times the trial's slots)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hpcdet.paths import StatePaths
from hpcdet.records import RunRecord
from hpcdet.rundir import gpu_idle

RUN_TREE = "run tree"
# Runs ended before hpcdet kept when their first node started: from submission, so the time
# they queued is counted too.
SUBMITTED = "submission to end"


@dataclass(frozen=True)
class RunUsage:
    trial_id: int
    run_id: int
    hours: float
    source: str  # "sacct", "qstat", RUN_TREE or SUBMITTED


@dataclass(frozen=True)
class Usage:
    """Slot-hours of the ended runs of a trial or an experiment, and where they came from."""

    unit: str  # "GPU-hours" or "slot-hours"
    hours: float
    sources: tuple[str, ...]  # each distinct source, in the order first met
    running: int  # runs not ended yet, not counted

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "hours": round(self.hours, 4), "sources": list(self.sources),
                "running": self.running}

    def line(self) -> str:
        """``1.25 GPU-hours (sacct, run tree); 1 run still running, not counted``."""
        text = f"{self.hours:.2f} {self.unit}"
        if self.sources:
            text += f" ({', '.join(self.sources)})"
        if self.running:
            text += f"; {self.running} run{'s' * (self.running > 1)} still running, not counted"
        return text


def unit(slots_per_trial: int) -> str:
    """A trial's slots are GPUs when it asks for any (hpcdet.config.experiment picks cuda)."""
    return "GPU-hours" if slots_per_trial > 0 else "slot-hours"


def run_usage(run: RunRecord, slots_per_trial: int) -> RunUsage | None:
    """A run's slot-hours, None while it has not ended. A CPU trial (no slots) counts as one
    slot. The scheduler's figure comes first: its elapsed seconds times the GPUs it allocated
    (a GPU trial) or the trial's slots."""
    if run.ended is None:
        return None
    slots = max(slots_per_trial, 1)
    if run.used_seconds is not None and run.usage_by:
        held = run.used_gpus if slots_per_trial > 0 and run.used_gpus is not None else slots
        return RunUsage(run.trial_id, run.run_id, run.used_seconds * held / 3600, run.usage_by)
    if run.started is not None:
        seconds = max(0.0, run.ended - run.started)
        return RunUsage(run.trial_id, run.run_id, seconds * slots / 3600, RUN_TREE)
    return RunUsage(run.trial_id, run.run_id,
                    max(0.0, run.ended - run.submitted) * slots / 3600, SUBMITTED)


def total(runs: Iterable[RunRecord], slots_per_trial: int) -> Usage:
    """The slot-hours of ``runs`` (a trial's, or an experiment's)."""
    hours, running = 0.0, 0
    sources: list[str] = []
    for run in runs:
        used = run_usage(run, slots_per_trial)
        if used is None:
            running += 1
            continue
        hours += used.hours
        if used.source not in sources:
            sources.append(used.source)
    return Usage(unit(slots_per_trial), hours, tuple(sources), running)


def by_trial(runs: Sequence[RunRecord], slots_per_trial: int) -> dict[int, Usage]:
    """Each trial's slot-hours, by trial id."""
    grouped: dict[int, list[RunRecord]] = {}
    for run in runs:
        grouped.setdefault(run.trial_id, []).append(run)
    return {trial_id: total(trial_runs, slots_per_trial)
            for trial_id, trial_runs in grouped.items()}


def slots_of(config: dict[str, Any]) -> int:
    """resources.slots_per_trial of a stored config (1 where it lacks one, as validation
    fills in)."""
    slots = config.get("resources", {}).get("slots_per_trial", 1)
    return slots if isinstance(slots, int) else 1


@dataclass(frozen=True)
class IdleGpu:
    """A GPU of a run that idled past the harness's threshold (``hpcdet.launch.gpu_watch``)
    and had not worked again by its last sample."""

    trial_id: int
    run_id: int
    host: str
    index: int
    uuid: str
    idle_since: float
    threshold: float
    until: float | None  # the run's end; None while it runs

    def line(self, now: float) -> str:
        end = now if self.until is None else self.until
        return (f"trial {self.trial_id} run {self.run_id}: GPU {self.index} on {self.host} "
                f"{'idle' if self.until is None else 'was idle'} (0% utilization) for "
                f"{(end - self.idle_since) / 60:.0f} min")

    def to_dict(self) -> dict[str, Any]:
        return {"trial_id": self.trial_id, "run_id": self.run_id, "host": self.host,
                "index": self.index, "uuid": self.uuid, "idle_since": self.idle_since,
                "threshold": self.threshold, "until": self.until}


def idle_gpus(paths: StatePaths, exp_id: int, runs: Iterable[RunRecord]) -> list[IdleGpu]:
    """The idle GPUs the runs' harnesses recorded in the run tree, by trial and run."""
    found = []
    for run in runs:
        for record in gpu_idle.read_all(paths.run(exp_id, run.trial_id, run.run_id)):
            for gpu in record["gpus"]:
                if isinstance(gpu, dict) and isinstance(gpu.get("idle_since"), (int, float)):
                    found.append(IdleGpu(run.trial_id, run.run_id, str(record.get("host", "")),
                                         int(gpu.get("index", -1)), str(gpu.get("uuid", "")),
                                         float(gpu["idle_since"]),
                                         float(record.get("threshold", 0)), run.ended))
    return found
