"""``determined.experimental``: Determined's SDK (``from determined.experimental import
client``) is hpcdet's, ``hpcdet.client``, where hpcdet is installed: on the login node, in
a notebook or script there. A trial's environment has hpcdet's trial side only, without the
SDK: there, taking ``client`` (or any name) from this module raises an ImportError that
says how a trial reads other checkpoints instead."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# Determined's names, each answered by __getattr__.
_NAMES = ("Checkpoint", "Experiment", "ExperimentReference", "Trial", "TrialReference",
          "client")
__all__ = list(_NAMES)

# Determined's names for the SDK's classes.
_CLASSES = {"Checkpoint": "Checkpoint", "Experiment": "Experiment",
            "ExperimentReference": "Experiment", "Trial": "Trial", "TrialReference": "Trial"}


def _load_client() -> tuple[types.ModuleType | None, str]:
    """hpcdet's SDK, or why it cannot be had here."""
    try:
        # By name: the trial side (this shim) must not depend on the SDK, which the trial's
        # read-only tree (hpcdet.trialside) does not hold.
        return importlib.import_module("hpcdet.client"), ""
    except ImportError as e:
        return None, (
            "determined.experimental (the SDK, `client`) is not available inside a trial run "
            f"by hpcdet ({e}): the SDK reads the daemon's database on the login node. In a "
            "trial, read another experiment's checkpoint with the Core API: "
            "`with core_context.checkpoint.restore_path(uuid) as path:` (or "
            "core_context.checkpoint.download(uuid, dir)), the uuid found with `hpcdet "
            "checkpoint list` or the SDK on the login node and passed in as a hyperparameter"
        )


_sdk, _missing = _load_client()
if _sdk is not None:
    sys.modules[__name__ + ".client"] = _sdk


def __getattr__(name: str) -> Any:
    if _sdk is None and (name == "__path__" or not name.startswith("__")):
        # __path__ too: `import determined.experimental.client` asks for it first.
        raise ImportError(_missing)
    if name.startswith("__"):  # the import system's and tools' probes
        raise AttributeError(name)
    if name == "client":
        return _sdk
    if name in _CLASSES:
        return getattr(_sdk, _CLASSES[name])
    raise AttributeError(
        f"determined.experimental.{name} is not in hpcdet's SDK, which offers "
        f"{', '.join(__all__)}; see `from determined.experimental import client`"
    )
