"""``determined`` for trials run by hpcdet: the names Core API scripts use, backed by hpcdet.

``import determined as det`` gives ``det.core``, ``det.get_cluster_info``, ``det.LOG_FORMAT``,
``det.InvalidHP``, ``det.ClusterInfo``, ``det.TrialInfo``, ``det.errors``, ``det.util``,
``det.common`` and ``det.__version__``.
"""

from __future__ import annotations

from hpcdet import DETERMINED_API as _API
from hpcdet import __version__ as _hpcdet_version
from hpcdet.core import LOG_FORMAT, ClusterInfo, InvalidHP, TrialInfo, get_cluster_info

from . import common, core, errors, util

# The Determined release whose API hpcdet follows, with hpcdet's own version as the local
# part: a script that compares det.__version__ with a Determined release gets 0.38's answer.
__version__ = f"{_API}+hpcdet.{_hpcdet_version}"
IS_HPCDET_SHIM = True

__all__ = [
    "LOG_FORMAT",
    "ClusterInfo",
    "InvalidHP",
    "TrialInfo",
    "__version__",
    "common",
    "core",
    "errors",
    "get_cluster_info",
    "util",
]
