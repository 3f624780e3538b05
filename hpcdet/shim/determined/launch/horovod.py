"""``python3 -m determined.launch.horovod``: Determined's Horovod launcher. Horovod is no
longer developed and hpcdet does not launch it: running this exits, and importing it raises
an ImportError, saying what to use instead."""

from __future__ import annotations

import sys

MESSAGE = (
    "hpcdet has no determined.launch.horovod (Horovod is no longer maintained): launch with "
    "`python3 -m determined.launch.torch_distributed python3 train.py` (PyTorch DDP), or "
    "`python3 -m determined.launch.deepspeed` for DeepSpeed"
)

if __name__ == "__main__":
    sys.exit(f"error: {MESSAGE}")
raise ImportError(MESSAGE)
