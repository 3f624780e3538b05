"""The container process's entry point: `python3 -I .../apptainerdouble/__main__.py stage2 PLAN`.

`exec` runs it through `unshare` (see stage2.py).  Isolated mode (-I) keeps the host's
PYTHON* variables and user site out; it also leaves this package off sys.path, hence the insert.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from apptainerdouble import stage2  # noqa: E402

if __name__ == "__main__":
    sys.exit(stage2.main(sys.argv[1:]))
