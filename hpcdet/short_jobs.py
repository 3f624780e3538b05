"""When a search's trials are short jobs, which sites punish: the advice to pack them
(``resources.packing``), at create from the site's minimum job length, and once its first
trials have run from how long they took."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from hpcdet.config import ExperimentConfig
from hpcdet.config.cluster import ClusterConfig

# Without a site minimum: LRZ bans users who submit more than 100 jobs shorter than 2 minutes.
DEFAULT_MINUTES = 2
FIRST_RUNS = 3  # ended runs before their speed is worth a word
PACKING = ("resources.packing: {slots: 4, walltime: '4:00:00', allocations: 2} "
           "(the slots of one node each)")


def _packs(cfg: ExperimentConfig) -> bool:
    """Whether packing could apply: a search of several trials, each a job of its own."""
    return cfg.resources.packing is None and cfg.searcher.name != "single"


def at_create(cfg: ExperimentConfig, cluster: ClusterConfig) -> str:
    """What to say of a search that runs a job per trial on a site that asks for long jobs."""
    if not cluster.min_job_minutes or not _packs(cfg):
        return ""
    return (f"this site asks for jobs of at least {cluster.min_job_minutes} minutes, and each "
            "trial of this search runs as a job of its own; if they are shorter, run them "
            f"packed in a few allocations: {PACKING}")


def from_runs(seconds: Sequence[float], cfg: ExperimentConfig, site_minutes: int | None
              ) -> str:
    """What to say once the search's first runs have ended, from how long each ran (start to
    end, as ``hpcdet.views.usage`` counts it): nothing unless their median is under the
    site's minimum job length (the cluster config's ``min_job_minutes``, or else
    ``DEFAULT_MINUTES``)."""
    if len(seconds) < FIRST_RUNS or not _packs(cfg):
        return ""
    minutes = site_minutes or DEFAULT_MINUTES
    median = statistics.median(seconds)
    if median >= minutes * 60:
        return ""
    limit = ("this site's minimum job length" if site_minutes
             else "the length under which sites such as LRZ count a job as too short")
    return (f"its trials run {median:.0f} s each as jobs of their own (median of {len(seconds)}"
            f"), under {minutes} minutes, {limit}; a search like it runs packed in a few "
            f"allocations: {PACKING}")
