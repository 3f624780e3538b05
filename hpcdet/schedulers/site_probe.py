"""What `hpcdet doctor` asks a batch system, as data: the commands that describe the site
(version, history, pools, limits, preemption), their parsers, and how to submit a tiny probe
job. One `SiteProbe` per backend, found by name (``probe_for``); none runs anything.
"""

from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

# Backend name -> "module:Class" of its probe, imported when asked for.
_PROBES = {
    "slurm": "hpcdet.schedulers.slurm_site:SlurmSite",
    "pbs": "hpcdet.schedulers.pbs_site:PbsSite",
}


@dataclass(frozen=True)
class Pool:
    """A partition (Slurm) or queue (PBS) as the site describes it."""

    name: str
    up: bool
    state: str  # the scheduler's words: "up, idle", "enabled, started"
    nodes: int
    cpus_per_node: int
    gpus_per_node: int = 0
    max_time: str = ""  # the scheduler's notation; "" or "infinite" when unlimited
    grace_seconds: int | None = None  # Slurm's GraceTime on preemption
    preempt_mode: str = ""
    default: bool = False


@dataclass(frozen=True)
class SiteFacts:
    """What the site's batch system says about itself (None: it did not say)."""

    backend: str
    version: str | None = None
    history: bool | None = None  # finished jobs can be asked about
    history_how: str = ""  # where history comes from, or why there is none
    pools: tuple[Pool, ...] = ()
    max_array_size: int | None = None
    max_jobs: int | None = None
    preempt_type: str = ""
    preempt_mode: str = ""
    preempt_signal: str = ""  # what hpcdet's jobs get before they must stop, in words
    extra: dict[str, str] = field(default_factory=dict)
    # The fewest jobs one user may have queued, where the site says (Slurm: an association's
    # MaxSubmitJobs or a QOS's MaxSubmitJobsPerUser), and which limit that is.
    max_user_jobs: int | None = None
    max_user_jobs_by: str = ""


class SiteProbe(abc.ABC):
    backend: ClassVar[str]
    # Commands that fail where the site lacks what they ask about (Slurm's sacctmgr without
    # slurmdbd): their failure is no fault of the backend's.
    optional: ClassVar[frozenset[str]] = frozenset()

    @abc.abstractmethod
    def commands(self) -> dict[str, list[str]]:
        """Named commands whose outputs `parse` reads (each run once; a failed one is left
        out of the outputs)."""

    @abc.abstractmethod
    def parse(self, outputs: dict[str, str]) -> SiteFacts: ...

    @abc.abstractmethod
    def submit_command(self, script: Path, *, name: str, nodes: int, pool: str | None,
                       output: Path, minutes: int) -> list[str]:
        """A batch submission of ``script`` on ``nodes`` nodes, one task each; its output
        (stdout and stderr) to ``output``."""

    @abc.abstractmethod
    def on_each_node(self) -> str:
        """The shell words that run the rest of the line once on each of the job's nodes."""

    @abc.abstractmethod
    def preemption_command(self, job_id: str, facts: SiteFacts, pool: str | None) -> list[str]:
        """Sends job ``job_id``, in ``pool``, what the site's preemption sends it."""


def probe_for(backend: str) -> SiteProbe | None:
    """The probe of ``backend``; None where there is no batch system to ask (local)."""
    target = _PROBES.get(backend)
    if target is None:
        return None
    module, _, cls = target.partition(":")
    found: type[SiteProbe] = getattr(importlib.import_module(module), cls)
    return found()


def key_values(text: str, sep: str = "=") -> dict[str, str]:
    """``Key = value`` lines (``scontrol show config``, ``qmgr -c 'list ...'``)."""
    found = {}
    for line in text.splitlines():
        key, got, value = line.partition(sep)
        if got and key.strip():
            found[key.strip()] = value.strip()
    return found


def leading_int(text: str) -> int:
    digits = ""
    for ch in text.strip():
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else 0


__all__ = ["Pool", "SiteFacts", "SiteProbe", "key_values", "leading_int", "probe_for"]
