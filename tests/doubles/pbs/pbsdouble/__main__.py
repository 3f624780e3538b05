"""Entry point of a job's detached runner, started by schedule.start_unit as
``python3 .../pbsdouble/__main__.py _runner <seq> <index|"">``."""

import os
import sys

if not __package__:
    # Run as a script, sys.path[0] is this directory; import the package from its parent
    # instead, so that the modules here cannot shadow others.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from pbsdouble.errors import eprint  # noqa: E402
from pbsdouble.runner import runner_main  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "_runner":
        sys.exit(runner_main(sys.argv[2], sys.argv[3]))
    eprint("pbsdouble: internal entry point; use the commands in bin/")
    sys.exit(2)
