"""``python3 -m determined.exec.harness module:Class``: runs hpcdet.pytorch.harness."""

from __future__ import annotations

import sys

from hpcdet.pytorch.harness import main

if __name__ == "__main__":
    sys.exit(main())
