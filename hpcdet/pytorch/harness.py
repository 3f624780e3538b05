"""``python3 -m hpcdet.pytorch.harness module:TrialClass``: one worker of a trial class.

What a legacy ``entrypoint: model_def:MyTrial`` and ``torch_distributed --trial`` run in each
worker: imports the class from the working directory, builds it with ``det.pytorch.init()``
and trains it with the ``Trainer``, everything else coming from the experiment config.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from hpcdet.core import LOG_FORMAT, get_cluster_info
from hpcdet.errors import TrialClassError
from hpcdet.pytorch._trainer import Trainer, init
from hpcdet.pytorch._trial import load_trial_class

USAGE = "usage: python3 -m hpcdet.pytorch.harness module:TrialClass"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 2
    # The config's `debug: true` turns on debug logging, as Determined's harness does.
    info = get_cluster_info()
    debug = info is not None and info.task_type == "TRIAL" and info.trial._debug
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, format=LOG_FORMAT)
    # The trial's modules are in the working directory (the context), as for `python3 x.py`.
    sys.path.insert(0, os.getcwd())
    try:
        trial_class = load_trial_class(args[0])
    except TrialClassError as e:
        print(f"hpcdet: {e}", file=sys.stderr)
        return 1
    with init() as context:
        trial = trial_class(context)
        Trainer(trial, context).fit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
