"""``python3 -m determined.launch.horovod``: Determined's Horovod launcher. Horovod is no
longer developed and hpcdet does not launch it: running this, or taking a name from it,
says what to use instead."""

from __future__ import annotations

import sys
from typing import NoReturn

# Determined's names, each answered by __getattr__.
_NAMES = ("create_sshd_worker_cmd", "main")
__all__ = list(_NAMES)

MESSAGE = (
    "hpcdet has no determined.launch.horovod (Horovod is no longer maintained): launch with "
    "`python3 -m determined.launch.torch_distributed python3 train.py` (PyTorch DDP), or "
    "`python3 -m determined.launch.deepspeed` for DeepSpeed"
)


def __getattr__(name: str) -> NoReturn:
    if name.startswith("__"):  # the import system's and tools' probes
        raise AttributeError(name)
    raise ImportError(MESSAGE)


if __name__ == "__main__":
    sys.exit(f"error: {MESSAGE}")
