"""``determined.common.util``: the metric group names and the JSON encoding trial scripts use.

The rest of Determined's module serves its master client and CLI, which trials on hpcdet do
not have.
"""

from __future__ import annotations

from ..util import json_encode

# Determined's names of the metric groups that have a series of their own.
_LEGACY_TRAINING = "training"
_LEGACY_VALIDATION = "validation"
_INFERENCE = "inference"

__all__ = ["_INFERENCE", "_LEGACY_TRAINING", "_LEGACY_VALIDATION", "json_encode"]
