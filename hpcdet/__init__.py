"""hpcdet: Determined's experiment platform on Slurm and PBS clusters, no server, no root."""

from __future__ import annotations

__version__ = "0.1.0"
