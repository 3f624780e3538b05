"""Preemption requests (``core_context.preempt``).

Two sources ask a trial to stop: the harness creates ``RUN_DIR/preempt`` when the scheduler
signals (SIGUSR2 before the walltime, SIGTERM), and the daemon sets ``"preempt": true`` in
``RUN_DIR/control.json`` (pause, cancel, searcher stop). A watcher thread checks both every
half second with one ``stat`` each; once either asks, ``should_preempt()`` stays true.

A scheduler that preempts or deletes a job (Slurm's preemption with a GraceTime, PBS's qdel
and preemption) sends SIGTERM to every process of the job, the trial's own included, and
SIGKILL a grace period later. So that the trial can checkpoint in that period, every worker
takes a SIGTERM as a preemption request too, unless the daemon is killing the run
(``RUN_DIR/kill``): that ends it at once, as SIGTERM would have.
"""

from __future__ import annotations

import enum
import logging
import os
import signal
import threading
from pathlib import Path
from types import FrameType

from hpcdet.core._distributed import DistributedContext
from hpcdet.core._events import RunEvents
from hpcdet.rundir.control import read_control
from hpcdet.rundir.filewatch import FileWatch
from hpcdet.rundir.layout import KILL_FILE, PREEMPT_FILE

logger = logging.getLogger("hpcdet.core")


class PreemptMode(enum.Enum):
    """Which workers may call ``should_preempt()`` and how they agree on the answer.

    ``WorkersAskChief``: every worker calls in step; the chief's answer is broadcast.
    ``ChiefOnly``: only the chief calls. ``WorkersAskMaster``: every worker watches on its own.
    """

    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHIEF_ONLY"
    WorkersAskMaster = "WORKERS_ASK_MASTER"


class PreemptWatcher:
    """Watches a run directory's preemption sources from a daemon thread.

    Args:
        preempt_file: Created by the harness when the scheduler signals preemption.
        control_file: The daemon's ``control.json`` (``hpcdet.rundir.control``).
        interval: Seconds between checks.
    """

    def __init__(self, preempt_file: Path, control_file: Path, interval: float = 0.5) -> None:
        self._preempt_file = preempt_file
        self._control = FileWatch(control_file)
        self._interval = interval
        self._requested = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reason = ""

    @property
    def requested(self) -> bool:
        """Whether preemption was requested; never goes back to false."""
        return self._requested.is_set()

    def start(self) -> None:
        """Check once now, then keep checking in the background until :meth:`close`."""
        if self._thread is not None:
            return
        self._check()
        self._thread = threading.Thread(target=self._loop, name="hpcdet-preempt", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        while not self._requested.is_set() and not self._stop.wait(self._interval):
            try:
                self._check()
            except OSError as e:  # a flaky shared filesystem must not kill the watcher
                logger.warning("checking for preemption failed, will retry: %s", e)

    def _check(self) -> None:
        if self._preempt_file.exists():
            self._set("the scheduler signalled preemption")
        elif self._control.changed():
            try:
                reason = read_control(self._control.path).stop_reason
            except ValueError as e:
                logger.warning("ignoring unreadable %s: %s", self._control.path, e)
                return
            if reason is not None:
                self._set(reason)

    def _set(self, reason: str) -> None:
        if not self._requested.is_set():
            self.reason = reason
            logger.info("preemption requested: %s", reason)
            self._requested.set()


class TermAsPreemption:
    """While installed, a SIGTERM to this process asks the trial to checkpoint and exit
    (``RUN_DIR/preempt``, which the chief's watcher sees) instead of ending it; after the
    daemon's kill it ends the process as the default action would.

    Installed only from the main thread (the only one Python lets set a handler) and only
    over the default action: a script's own SIGTERM handler stays the script's.
    """

    def __init__(self, run_dir: Path) -> None:
        self._preempt_file = run_dir / PREEMPT_FILE
        self._kill_file = run_dir / KILL_FILE
        self._installed = False
        self._heard = False

    def install(self) -> None:
        if (threading.current_thread() is not threading.main_thread()
                or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
            return
        signal.signal(signal.SIGTERM, self._on_term)
        self._installed = True

    def uninstall(self) -> None:
        # After a preemption's SIGTERM the process is on its way out, having checkpointed:
        # another SIGTERM (a launcher passes the job's on, a process manager sends its own)
        # must not turn its exit code 0 into 143. Python restores the default action of a
        # signal it handled when it finalizes, but not an ignored one.
        if self._installed and signal.getsignal(signal.SIGTERM) == self._on_term:
            signal.signal(signal.SIGTERM, signal.SIG_IGN if self._heard else signal.SIG_DFL)
        self._installed = False

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        if self._kill_file.exists():
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        if self._heard:
            return
        self._heard = True
        # Not the logging module: a handler runs between two bytecodes of whatever the main
        # thread was doing, which may be logging.
        os.write(2, b"[hpcdet] SIGTERM: the job is ending; asking the trial to checkpoint "
                    b"and exit (should_preempt() is now true)\n")
        try:
            self._preempt_file.touch()
        except OSError as e:
            os.write(2, f"[hpcdet] could not ask for a checkpoint: {e}\n".encode())


class PreemptContext:
    """Tells the trial when to checkpoint and exit so it can be resumed later.

    Args:
        dist: The trial's distributed context.
        watcher: Watches this run's preemption sources.
        events: The run's event log, which receives ``preempt_ack``.
        preempt_mode: See :class:`PreemptMode`.
        term: Makes a SIGTERM a preemption request on every worker while started.
    """

    def __init__(
        self,
        dist: DistributedContext,
        watcher: PreemptWatcher,
        events: RunEvents,
        preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
        term: TermAsPreemption | None = None,
    ) -> None:
        self._dist = dist
        self._term = term
        self._mode = PreemptMode(preempt_mode)
        self._events = events
        watches = dist.rank == 0 or self._mode == PreemptMode.WorkersAskMaster
        self._watcher = watcher if watches else None
        self._started = False
        self._acked = False

    def start(self) -> None:
        """Start watching; ``core.init()``'s context manager calls this."""
        if self._term is not None:
            self._term.install()
        if self._watcher is not None:
            self._watcher.start()
        self._started = True

    def close(self) -> None:
        """Stop watching."""
        if self._term is not None:
            self._term.uninstall()
        if self._watcher is not None:
            self._watcher.close()

    def should_preempt(self, auto_ack: bool = True) -> bool:
        """Whether the trial should checkpoint and exit now; once true, stays true.

        Non-blocking. In ``WorkersAskChief`` mode every worker must call it the same number of
        times. The first true answer with ``auto_ack`` acknowledges the request, so that an
        exit with code 0 counts as preempted (to be resumed) rather than completed.

        Raises:
            RuntimeError: Called before :meth:`start`, or from a non-chief in ``ChiefOnly``.
        """
        if not self._started:
            raise RuntimeError(
                "should_preempt() was called before the PreemptContext was started; use "
                "`with det.core.init() as core_context:` or call core_context.start()"
            )
        rank = self._dist.rank
        if self._mode == PreemptMode.ChiefOnly and rank != 0:
            raise RuntimeError(
                "PreemptContext was configured with preempt_mode=ChiefOnly but "
                f".should_preempt() was called from non-chief worker of rank={rank}"
            )
        mine = self._watcher is not None and self._watcher.requested
        if self._mode == PreemptMode.WorkersAskChief:
            answer = bool(self._dist.broadcast(mine if rank == 0 else None))
        else:
            answer = mine
        if answer and auto_ack and not self._acked:
            self.acknowledge_preemption_signal()
        return answer

    def acknowledge_preemption_signal(self) -> None:
        """Record that the trial will exit for the preemption (the chief's ack counts)."""
        if self._acked:
            return
        self._acked = True
        if self._dist.rank == 0:
            self._events.emit("preempt_ack", {}, flush=True)


class DummyPreemptContext:
    """Off-cluster stand-in: never asks to preempt, but keeps workers in step."""

    def __init__(
        self,
        dist: DistributedContext,
        preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    ) -> None:
        self._dist = dist
        self._mode = PreemptMode(preempt_mode)

    def start(self) -> None:
        """Nothing to watch."""

    def close(self) -> None:
        """Nothing to stop."""

    def should_preempt(self, auto_ack: bool = True) -> bool:
        """Always false; in ``WorkersAskChief`` mode still a collective call."""
        if self._mode == PreemptMode.WorkersAskChief:
            self._dist.broadcast(False)
        return False

    def acknowledge_preemption_signal(self) -> None:
        """Nothing to acknowledge."""
