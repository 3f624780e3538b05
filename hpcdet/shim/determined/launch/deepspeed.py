"""``python3 -m determined.launch.deepspeed``: runs :mod:`hpcdet.launch.deepspeed`."""

from __future__ import annotations

import sys

from hpcdet.launch.deepspeed import main

if __name__ == "__main__":
    sys.exit(main())
