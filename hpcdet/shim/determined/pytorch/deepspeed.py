"""``determined.pytorch.deepspeed``: Determined's DeepSpeedTrial API, which hpcdet does not
offer. The module imports (every module of the trial's tree does), and any name taken from
it raises an ImportError that says what to use instead."""

from __future__ import annotations

from .._refused import refusing

# Determined's names, each answered by __getattr__.
_NAMES = ("DeepSpeedTrial", "DeepSpeedTrialContext", "ModelParallelUnit", "Trainer", "init",
          "make_data_parallel_mpu", "make_deepspeed_mpu", "overwrite_deepspeed_config")
__all__ = list(_NAMES)

MESSAGE = (
    "hpcdet has no determined.pytorch.deepspeed (DeepSpeedTrial, DeepSpeedTrialContext): "
    "train with DeepSpeed from a Core API script instead (entrypoint `python3 -m "
    "determined.launch.deepspeed python3 train.py`, with "
    "`det.core.DistributedContext.from_deepspeed()` in the script), or use "
    "det.pytorch.PyTorchTrial"
)


__getattr__ = refusing(MESSAGE)
