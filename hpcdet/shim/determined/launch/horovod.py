"""``python3 -m determined.launch.horovod``: Determined's Horovod launcher. Horovod is no
longer developed and hpcdet does not launch it: running this, or taking a name from it,
says what to use instead."""

from __future__ import annotations

import sys

from .._refused import refusing

# Determined's names, each answered by __getattr__.
_NAMES = ("create_sshd_worker_cmd", "main")
__all__ = list(_NAMES)

MESSAGE = (
    "hpcdet has no determined.launch.horovod (Horovod is no longer maintained): launch with "
    "`python3 -m determined.launch.torch_distributed python3 train.py` (PyTorch DDP), or "
    "`python3 -m determined.launch.deepspeed` for DeepSpeed"
)


__getattr__ = refusing(MESSAGE)


if __name__ == "__main__":
    sys.exit(f"error: {MESSAGE}")
