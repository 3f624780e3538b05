"""`hpcdet doctor`: a preflight of a cluster, each finding saying what to change.

The site's batch system is asked through the backend's `SiteProbe` (commands as data, pure
parsers); the compute nodes' side is seen through tiny probe jobs; everything runs through
the one command runner.
"""

from __future__ import annotations

from hpcdet.doctor.diagnose import DEFAULT_TIMEOUT, Options, diagnose
from hpcdet.doctor.findings import Finding, Status, failed

__all__ = ["DEFAULT_TIMEOUT", "Finding", "Options", "Status", "diagnose", "failed"]
