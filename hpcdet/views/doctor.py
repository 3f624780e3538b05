"""`hpcdet doctor`'s findings for the CLI (and any other face): the cluster config loaded and
the doctor run."""

from __future__ import annotations

from pathlib import Path

from hpcdet.config.cluster import load_cluster_config
from hpcdet.doctor import Finding, Options, diagnose, failed
from hpcdet.paths import StatePaths


def doctor_findings(paths: StatePaths, quick: bool, timeout: float, pool: str | None = None,
                    storage: Path | None = None) -> list[Finding]:
    return diagnose(load_cluster_config(), paths, Options(quick, timeout, pool, storage))


def any_failed(findings: list[Finding]) -> bool:
    """Whether a check failed: `hpcdet doctor` exits 1."""
    return failed(findings)


__all__ = ["any_failed", "doctor_findings"]
