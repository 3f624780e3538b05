"""``determined.errors``: the errors Core API scripts catch."""

from __future__ import annotations

from hpcdet.core import CheckpointNotFound, InvalidHP

__all__ = ["CheckpointNotFound", "InvalidHP"]
