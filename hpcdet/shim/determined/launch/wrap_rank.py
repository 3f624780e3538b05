"""``python3 -m determined.launch.wrap_rank``: runs :mod:`hpcdet.launch.wrap_rank`."""

from __future__ import annotations

import sys

from hpcdet.launch.wrap_rank import main

if __name__ == "__main__":
    sys.exit(main())
