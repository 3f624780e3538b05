"""``core.init()`` and the :class:`Context` it returns, on and off the cluster.

On the cluster, every report becomes an event in the run's ``events.jsonl``, written by one
:class:`RunEvents` per run on the chief. Off the cluster (no ``HPCDET_CLUSTER_INFO``), the
same script runs against dummies that log, with checkpoints in a local directory.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from hpcdet.core._checkpoint import CheckpointContext, DummyCheckpointContext, resolve_storage
from hpcdet.core._distributed import DistributedContext, DummyDistributedContext
from hpcdet.core._events import RunEvents
from hpcdet.core._info import ClusterInfo, get_cluster_info
from hpcdet.core._preempt import (
    DummyPreemptContext,
    PreemptContext,
    PreemptMode,
    PreemptWatcher,
    TermAsPreemption,
)
from hpcdet.core._searcher import (
    ConfigOps,
    ControlOps,
    DummySearcherContext,
    OpSource,
    SearcherContext,
    SearcherContextMissing,
    configured_length,
    has_daemon_ops,
)
from hpcdet.core._train import DummyTrainContext, EarlyExitReason, TensorboardMode, TrainContext
from hpcdet.rundir.event_writer import EventWriter
from hpcdet.rundir.layout import CONTROL_FILE, EVENTS_FILE, PREEMPT_FILE, bell, tensorboard_dir

logger = logging.getLogger("hpcdet.core")

LOG_FORMAT = "%(levelname)s: [%(process)s] %(name)s: %(message)s"

class InvalidHP(Exception):
    """Raise inside ``with core.init()`` when the trial's hyperparameters cannot work.

    The context reports the early exit to the searcher, which replaces the trial, and exits
    the process with code 0.
    """


class DummyProfilerContext:
    """System-metrics profiling; hpcdet does not collect it yet, so this only validates."""

    def on(self, sampling_interval: float = 1, samples_per_report: int = 10) -> None:
        """Accepted and ignored (with an info log).

        Raises:
            ValueError: ``sampling_interval`` is below 0.1 s.
        """
        if sampling_interval < 0.1:
            raise ValueError(f"sampling_interval must be at least 0.1, not {sampling_interval}")
        logger.info("hpcdet does not collect system metrics yet; profiler.on() does nothing")

    def off(self) -> None:
        """Nothing to stop."""


class DummyExperimentalContext:
    """Determined's experimental reports of checkpoint/model use; hpcdet ignores them."""

    def report_task_using_checkpoint(self, checkpoint: Any) -> None:
        """Ignored."""

    def report_task_using_model_version(self, model_version: Any) -> None:
        """Ignored."""


ALERT_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
                "error": logging.ERROR, "critical": logging.CRITICAL}


class Context:
    """The Core API of one process: a composition of one context per concern.

    Use it as ``with core.init() as core_context:``; entering starts the background threads,
    leaving writes every pending event and stops them. Leaving with :class:`InvalidHP` reports
    an early exit and exits the process with code 0.

    Attributes:
        checkpoint, distributed, preempt, train, searcher, profiler, experimental: The
            component contexts. info: The cluster info, ``None`` off-cluster.
    """

    def __init__(
        self,
        checkpoint: CheckpointContext | DummyCheckpointContext,
        *,
        distributed: DistributedContext | None = None,
        preempt: PreemptContext | DummyPreemptContext | None = None,
        train: TrainContext | DummyTrainContext | None = None,
        searcher: SearcherContext | DummySearcherContext | SearcherContextMissing | None = None,
        info: ClusterInfo | None = None,
        profiler: DummyProfilerContext | None = None,
        experimental: DummyExperimentalContext | None = None,
        _events: RunEvents | None = None,
    ) -> None:
        self.checkpoint = checkpoint
        self.distributed = distributed or DummyDistributedContext()
        self.preempt = preempt or DummyPreemptContext(self.distributed)
        self.train = train or DummyTrainContext()
        self.searcher = searcher or SearcherContextMissing()
        self.info = info
        self.profiler = profiler or DummyProfilerContext()
        self.experimental = experimental or DummyExperimentalContext()
        self._events = _events or RunEvents(None)
        self._started = False

    def alert(self, title: str = "", description: str = "", level: str = "info") -> None:
        """Raise an alert about this trial: it is logged in the trial's log, and the chief's is
        kept with the trial (``hpcdet trial describe`` lists them) and, as Determined's, sent
        to the webhooks with a CUSTOM trigger that the experiment's ``integrations.webhooks``
        names (``hpcdet.notify``).

        Raises:
            ValueError: ``level`` is not one of debug, info, warn, error, critical.
        """
        name = str(level).lower()
        name = "warn" if name == "warning" else name
        if name not in ALERT_LEVELS:
            raise ValueError(f"alert level must be one of {', '.join(ALERT_LEVELS)}, not {level!r}")
        logger.log(ALERT_LEVELS[name], "alert: %s%s", title,
                   f": {description}" if description else "")
        if self._events.reporting:
            self._events.emit("alert", {"title": str(title), "description": str(description),
                                        "level": name}, flush=True)

    def start(self) -> None:
        """Start the event writer and the preemption watcher (idempotent)."""
        if self._started:
            return
        self._started = True
        self._events.start()
        self.preempt.start()

    def close(self) -> None:
        """Stop the watcher and the transport, then write every pending event.

        Raises:
            RuntimeError: Writing events failed; some reports did not reach the daemon.
        """
        try:
            self.preempt.close()
            self.distributed.close()
        finally:
            self._events.close()

    def __enter__(self) -> Context:
        self.start()
        return self

    def __exit__(
        self,
        typ: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(value, InvalidHP):
            logger.info("InvalidHP raised: reporting an early exit, then exiting with code 0")
            try:
                if self.distributed.rank == 0:
                    self.train.report_early_exit(EarlyExitReason.INVALID_HP)
            finally:
                self.close()
            sys.exit(0)
        self.close()


def _default_storage() -> Path:
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "hpcdet" / "checkpoints"


def _install_stack_dumper() -> None:
    # As in Determined: `kill -USR1 <pid>` prints every thread's stack to find a hang.
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)


def _dummy_init(
    *,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
) -> Context:
    """The off-cluster context: dummies that log, and checkpoints in a local directory."""
    dist = distributed or DummyDistributedContext()
    base = resolve_storage(checkpoint_storage, _default_storage())
    if checkpoint_storage is None:
        logger.info("no checkpoint storage given; storing checkpoints in %s", base)
    return Context(
        DummyCheckpointContext(dist, base),
        distributed=dist,
        preempt=DummyPreemptContext(dist),
        train=DummyTrainContext(),
        searcher=DummySearcherContext(dist),
    )


def init(
    *,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
) -> Context:
    """Create the Core API context of this process (use it in a ``with`` statement).

    Args:
        distributed: Required when the task has several slots or nodes; otherwise a
            single-process context is used.
        checkpoint_storage: A directory overriding the run's checkpoint storage (see
            :func:`~hpcdet.core._checkpoint.resolve_storage`).
        preempt_mode: How workers agree on ``should_preempt()``.
        tensorboard_mode: ``AUTO`` or ``MANUAL`` TensorBoard publishing.

    Raises:
        ValueError: A multi-slot task without ``distributed``, or unsupported storage.
        RuntimeError: Another context is open for the same run in this process.
    """
    info = get_cluster_info()
    if info is None:
        return _dummy_init(distributed=distributed, checkpoint_storage=checkpoint_storage)
    if distributed is None:
        if len(info.container_addrs) > 1 or len(info.slot_ids) > 1:
            raise ValueError("you must provide a valid DistributedContext for a multi-slot task")
        distributed = DummyDistributedContext()
    _install_stack_dumper()
    if info.task_type != "TRIAL":
        return Context(
            DummyCheckpointContext(
                distributed, resolve_storage(checkpoint_storage, _default_storage())
            ),
            distributed=distributed,
            preempt=DummyPreemptContext(distributed, preempt_mode),
            info=info,
        )

    run_dir = info._run_dir
    trial = info.trial
    base = resolve_storage(checkpoint_storage, info._checkpoint_dir)
    length, units = configured_length(trial._config.get("searcher") or {})
    daemon_ops = has_daemon_ops(run_dir / CONTROL_FILE)
    # Last step that can fail: RunEvents claims the run's event log until close().
    events = RunEvents(EventWriter(run_dir / EVENTS_FILE, bell=bell(run_dir))
                       if distributed.rank == 0 else None)
    tensorboard = tensorboard_dir(base, info.cluster_id, trial.experiment_id, trial.trial_id)
    watcher = PreemptWatcher(run_dir / PREEMPT_FILE, run_dir / CONTROL_FILE)
    source: OpSource | None = None
    if daemon_ops:
        source = ControlOps(run_dir / CONTROL_FILE, events.flush, watcher)
    elif length is not None:
        source = ConfigOps(length)
    searcher: SearcherContext | SearcherContextMissing = (
        SearcherContextMissing()
        if source is None
        else SearcherContext(distributed, events, source, units)
    )
    logger.debug("hpcdet Core API: trial %s, run directory %s", trial.trial_id, run_dir)
    return Context(
        CheckpointContext(distributed, base, events),
        distributed=distributed,
        preempt=PreemptContext(distributed, watcher, events, preempt_mode,
                               TermAsPreemption(run_dir)),
        train=TrainContext(
            events,
            control_path=run_dir / CONTROL_FILE,
            tensorboard_path=tensorboard,
            tensorboard_mode=TensorboardMode(tensorboard_mode),
            metadata=info._spec.metadata,
        ),
        searcher=searcher,
        info=info,
        _events=events,
    )
