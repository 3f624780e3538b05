"""hpcdet's Core API: Determined's ``determined.core`` for trials on Slurm and PBS.

Inside trials, ``import determined as det`` resolves to a shim over this package, so scripts
written for Determined (0.37 and 0.38 generations) run unchanged::

    with det.core.init() as core_context:
        core_context.train.report_training_metrics(steps_completed=10, metrics={"x": 1})

On the cluster, reports become events in the run directory that the hpcdet daemon ingests;
off the cluster the same script runs against local dummies.
"""

from __future__ import annotations

from hpcdet.core._checkpoint import (
    CheckpointContext,
    CheckpointNotFound,
    DownloadMode,
    DummyCheckpointContext,
)
from hpcdet.core._context import (
    LOG_FORMAT,
    Context,
    DummyExperimentalContext,
    DummyProfilerContext,
    InvalidHP,
    init,
)
from hpcdet.core._context import _dummy_init as _dummy_init  # for Determined's Trainer APIs
from hpcdet.core._distributed import DistributedContext, DummyDistributedContext, Transport
from hpcdet.core._info import ClusterInfo, TrialInfo, get_cluster_info
from hpcdet.core._mpi import MpiTransport
from hpcdet.core._preempt import DummyPreemptContext, PreemptContext, PreemptMode
from hpcdet.core._searcher import (
    DummySearcherContext,
    SearcherContext,
    SearcherContextMissing,
    SearcherMode,
    SearcherOperation,
    Unit,
)
from hpcdet.core._tcp import TcpTransport
from hpcdet.core._train import DummyTrainContext, EarlyExitReason, TensorboardMode, TrainContext

__all__ = [
    "LOG_FORMAT",
    "CheckpointContext",
    "CheckpointNotFound",
    "ClusterInfo",
    "Context",
    "DistributedContext",
    "DownloadMode",
    "DummyCheckpointContext",
    "DummyDistributedContext",
    "DummyExperimentalContext",
    "DummyPreemptContext",
    "DummyProfilerContext",
    "DummySearcherContext",
    "DummyTrainContext",
    "EarlyExitReason",
    "InvalidHP",
    "MpiTransport",
    "PreemptContext",
    "PreemptMode",
    "SearcherContext",
    "SearcherContextMissing",
    "SearcherMode",
    "SearcherOperation",
    "TcpTransport",
    "TensorboardMode",
    "TrainContext",
    "Transport",
    "TrialInfo",
    "Unit",
    "get_cluster_info",
    "init",
]
