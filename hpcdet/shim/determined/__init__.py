"""``determined`` for trials run by hpcdet: the names Core API scripts use, backed by hpcdet.

``import determined as det`` gives ``det.core``, ``det.get_cluster_info``, ``det.LOG_FORMAT``,
``det.InvalidHP``, ``det.ClusterInfo``, ``det.TrialInfo`` and ``det.errors``.
"""

from __future__ import annotations

from hpcdet.core import LOG_FORMAT, ClusterInfo, InvalidHP, TrialInfo, get_cluster_info

from . import core, errors

__all__ = [
    "LOG_FORMAT",
    "ClusterInfo",
    "InvalidHP",
    "TrialInfo",
    "core",
    "errors",
    "get_cluster_info",
]
