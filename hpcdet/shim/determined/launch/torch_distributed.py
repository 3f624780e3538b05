"""``python3 -m determined.launch.torch_distributed``: runs hpcdet.launch.torch_distributed."""

from __future__ import annotations

import sys

from hpcdet.launch.torch_distributed import main

if __name__ == "__main__":
    sys.exit(main())
