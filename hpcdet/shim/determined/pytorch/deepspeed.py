"""``determined.pytorch.deepspeed``: Determined's DeepSpeedTrial API, which hpcdet does not
offer. Importing it raises an ImportError that says what to use instead."""

from __future__ import annotations

MESSAGE = (
    "hpcdet has no determined.pytorch.deepspeed (DeepSpeedTrial, DeepSpeedTrialContext): "
    "train with DeepSpeed from a Core API script instead (entrypoint `python3 -m "
    "determined.launch.deepspeed python3 train.py`, with "
    "`det.core.DistributedContext.from_deepspeed()` in the script), or use "
    "det.pytorch.PyTorchTrial"
)

raise ImportError(MESSAGE)
