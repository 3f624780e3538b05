"""hpcdet: Determined's experiment platform on Slurm and PBS clusters, no server, no root."""

from __future__ import annotations

__version__ = "0.1.0"
# The Determined release whose Core API, PyTorch API, CLI and config hpcdet follows.
DETERMINED_API = "0.38.0"
