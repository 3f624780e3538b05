"""The per-user daemon: the only writer of the database and the only caller of the scheduler.

One loop, every ``TICK_SECONDS``, and sooner when a request waits, a run rang the bell or the
last tick decided something: answer requests, ingest trial events, notice ended runs, submit
queued trials (rate-limited), and every poll interval ask the scheduler once about all of the
user's jobs. A tick looks at the runs that rang (``bell``); a sweep, every tick while that is
cheap and less often the more live runs there are, looks at every live run. The loop owns the
services that do each of these; each is built here with what it needs, and none calls into
another except through what it was given.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from typing import Any

from hpcdet import __version__
from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon import requests as req
from hpcdet.daemon.commands import Commands
from hpcdet.daemon.configs import Configs
from hpcdet.daemon.controls import Controls
from hpcdet.daemon.creation import Creation
from hpcdet.daemon.finishing import Finisher
from hpcdet.daemon.guard import Guard
from hpcdet.daemon.ingestion import Ingestion
from hpcdet.daemon.jobs import Jobs
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.queueing import Queue
from hpcdet.daemon.request_bell import RequestBell
from hpcdet.daemon.retention import Retention
from hpcdet.daemon.run_bell import RunBell
from hpcdet.daemon.run_ends import RunEnds
from hpcdet.daemon.searching import SearchDriver
from hpcdet.daemon.site import Site
from hpcdet.daemon.submission import Submission
from hpcdet.notify import Notifier
from hpcdet.paths import StatePaths, hostname
from hpcdet.protocol.lease import Lease
from hpcdet.protocol.process import STATUS_FILE
from hpcdet.records import ExperimentRecord as Experiment
from hpcdet.records import RunRecord as Run
from hpcdet.rundir.atomic import write_atomic
from hpcdet.rundir.events import Event
from hpcdet.schedulers import Scheduler, make_scheduler
from hpcdet.schedulers.runner import CommandRunner
from hpcdet.states import RUNNING_EXPERIMENT_STATES, ExperimentState
from hpcdet.store.entries import Entry, ExperimentStateChanged
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)

# How often the loop looks for a waiting request and a ring of the run bell; a request from a
# CLI on this host rings the doorbell (``wake``) and is looked for at once. Each look is two
# directory reads: 0.25 s made them a fifth of a quiet daemon's CPU (issue 42's budget: 5
# CPU-minutes a day at 100 trials), for decisions ~0.12 s sooner on average.
LOOP_SECONDS = 0.5
# How often a tick runs without one: it serves what came due (a poll, a sweep, a held
# submission); what rang is served at once, so nothing waits for this.
TICK_SECONDS = 2.0
# A sweep reads every live run (its event log, exit file and control file): with a thousand
# runs of 10 reports a second it costs ~0.1 s, plus ~1 us a report. Sweeps come every tick
# while they take at most this share of the time, and otherwise as often as keeps them to it,
# at most MAX_SWEEP_SECONDS apart: how late training metrics and progress may reach the
# database (at a thousand live runs, every ~60 s; with 10 s, as before 2026-11-27, sweeps took
# 1.2% of a core there, the daemon 2.4% in all). Until 2026-11-29 the share was 0.5% and
# sweeps at most 30 s apart: at 100 live runs reporting once a second, sweeps every ~2 s were
# most of the daemon's 13 CPU-minutes a day (issue 42's budget is 5); now every 60 s there,
# each ~0.4 ms a run, and the daemon spends ~4. Runs that wrote what the daemon decides on,
# or ended, ring the bell and are looked at on the next tick whatever this says.
SWEEP_SHARE = 0.0005
MAX_SWEEP_SECONDS = 60.0
LOCAL_POLL_SECONDS = 1.0
# A poll asks the scheduler about every live job and orders the pending ones: at a thousand it
# costs the daemon ~15 ms of CPU. Polls come every poll interval while they take at most this
# share of a core, and otherwise as often as keeps them to it (every ~15 s at a hundred live
# jobs, ~30 s at a thousand; 0.15% before 2026-11-29), at most MAX_POLL_SECONDS apart unless
# the poll interval is longer. A poll finds what
# no file says (a job that died without writing its exit file, a pending job that started); a
# run's own end rings the bell and is seen at once. The scheduler's own time is not counted: a
# slow slurmctld must not make a small daemon poll less.
POLL_SHARE = 0.0005
MAX_POLL_SECONDS = 60.0
# The heartbeat renews the lease (``protocol/lease.py``) this often, and at least 4 times a
# lease, so that a CLI on another host tells a daemon that missed two from a live one.
HEARTBEAT_SECONDS = 30.0
# How often a tick runs while there is nothing to do (no unfinished experiment, no live run):
# only a request can change that. A request from this host rings the doorbell and is served at
# once; one from another login node is looked for every IDLE_LOOP_SECONDS (a directory read on
# the shared filesystem) instead of every LOOP_SECONDS. An idle daemon then costs next to
# nothing on a shared login node.
IDLE_TICK_SECONDS = 10.0
IDLE_LOOP_SECONDS = 1.0


class Daemon:
    """The loop: requests, events, the scheduler's word, decisions (module docstring)."""

    def __init__(
        self, paths: StatePaths, cluster: ClusterConfig, runner: CommandRunner | None = None
    ) -> None:
        self.paths = paths
        self.cluster = cluster
        # First: a daemon that serves this state directory on another host keeps it.
        self.lease = Lease.take(paths, cluster.daemon_lease)
        self.heartbeat_every = min(HEARTBEAT_SECONDS, cluster.daemon_lease / 4)
        self.deposed: str | None = None  # who took the lease from this daemon
        self.local_dir = paths.local_dir()  # where its database is, for its whole life
        self.store = Store(paths.database())
        self.journal = Journal(paths, self.store)
        self.runner = runner or CommandRunner()
        self.scheduler: Scheduler = make_scheduler(
            cluster.backend,
            {"jobs_dir": str(paths.local_jobs()),
             "template_dir": cluster.template_dir},
        )
        self.backend = self.scheduler.name
        poll_interval = (LOCAL_POLL_SECONDS if self.backend == "local"
                         else max(5.0, float(cluster.min_poll_interval)))
        self.configs = Configs()
        self.search = SearchDriver(self.store, self.journal)
        self.jobs = Jobs(self.scheduler, self.runner, self.store, poll_interval)
        self.site = Site(self.scheduler, self.runner, cluster)
        self.retention = Retention(self.store, self.journal, self.configs, paths)
        self.finisher = Finisher(self.store, self.journal, self.jobs, self.retention, paths)
        self.guard = Guard(self.store, self.journal, self.search, self.jobs, self.finisher)
        self.controls = Controls(self.store, paths, self.configs, self.jobs, self.site,
                                 self.guard)
        self.ingestion = Ingestion(self.store, paths, self.configs, self.search, self.guard)
        self.run_ends = RunEnds(self.store, self.journal, paths, self.configs, self.jobs,
                                self.ingestion, self.controls, self.retention,
                                cluster.min_job_minutes)
        self.jobs.run_dir = paths.run
        self.submission = Submission(self.store, self.journal, paths, cluster, self.configs,
                                     self.jobs, self.site, self.search, self.controls,
                                     self.guard)
        self.queue = Queue(self.store, self.journal, paths, self.configs, self.jobs, self.site,
                           self.controls)
        self.creation = Creation(self.store, self.journal, paths, self.configs, self.search,
                                 self.guard, self.submission)
        # Webhooks are told of what is journaled and ingested; they only enqueue (notify).
        self.notifier = Notifier.of(paths)
        self.journal.listeners.append(self._tell_states)
        self.ingestion.on_alerts = self._tell_alerts
        self.commands = Commands(self.store, self.journal, paths, self.configs, self.controls,
                                 self.submission, self.retention, self.queue, self.creation,
                                 self.finisher, self.stop, self.notifier)
        self.run_bell = RunBell(paths)
        self.started = time.time()
        self.next_sweep = 0.0
        self.poll_cost = 0.0  # the daemon's CPU seconds in the last poll
        self.poll_share = POLL_SHARE
        self.passed = -1  # the journal's count when the per-experiment passes last ran
        self.synced = -1  # the journal's count when every control file was last synced
        self.last_tick = 0.0
        self.last_decision = 0.0  # when a tick last journaled a decision
        self.stopping = False
        self.idle = False  # the last tick found nothing to do (IDLE_TICK_SECONDS)

    # ---------------------------------------------------------------- lifecycle of the loop

    def serve(self) -> None:
        doorbell = RequestBell(self.paths)
        self.notifier.deliverer.start()
        try:
            self._serve(doorbell)
        finally:
            doorbell.close()
            self.notifier.deliverer.stop()
        self.write_status()

    def _serve(self, doorbell: RequestBell) -> None:
        started = False
        failures = 0
        decided = False
        while not self.stopping:
            try:
                if not self.heartbeat():
                    break
                if not started:
                    self.reconcile()
                    started = True
                elif (time.time() - self.last_tick >= (LOOP_SECONDS if decided else
                                                       IDLE_TICK_SECONDS if self.idle else
                                                       TICK_SECONDS)
                      or req.waiting(self.paths) or (not self.idle and self.run_bell.rung())):
                    journaled = self.journal.recorded
                    self.tick(sweep=time.time() >= self.next_sweep)
                    # A decision's consequences (a trial's end, then its search's answer, then
                    # the experiment's end) come a tick apart: the next tick is not put off.
                    decided = self.journal.recorded != journaled
                    if decided:
                        self.last_decision = self.last_tick
                failures = 0
            except Exception as e:
                if not started and not isinstance(e, OSError):
                    raise  # a daemon that cannot start says so; a passing I/O error is retried
                # Keep serving: the state is in the run tree and the database; a bug in one
                # tick must not orphan running jobs. Back off while it repeats.
                failures += 1
                log.exception("%s failed (%d in a row)", "tick" if started else "start", failures)
                time.sleep(min(30.0, LOOP_SECONDS * 2**failures))
            doorbell.wait(IDLE_LOOP_SECONDS if self.idle else LOOP_SECONDS)

    def stop(self) -> None:
        self.stopping = True

    def heartbeat(self) -> bool:
        """Renew the lease when it is due; False when another daemon took it over (this one
        was frozen or cut off for longer than the lease): it stops and writes nothing more."""
        if self.deposed is None and (self.stopping or
                                     time.time() - self.lease.renewed >= self.heartbeat_every):
            record = {"started": self.started, "database": str(self.store.path),
                      "backend": self.backend, "version": __version__,
                      "local_dir": str(self.local_dir), **self._unreachable()}
            self.deposed = self.lease.renew(record, running=not self.stopping)
            if self.deposed is not None:
                log.error("the daemon on %s took over this state directory's lease (this one "
                          "was not heard from for longer than the lease): stopping at once",
                          self.deposed)
                self.stopping = True
        return self.deposed is None

    def _tell_states(self, exp_id: int, entries: Sequence[Entry]) -> None:
        states = [e.state for e in entries if isinstance(e, ExperimentStateChanged)]
        if states and self.notifier.registry.hooks:
            self.notifier.experiment_states(self.store.experiment(exp_id), states)

    def _tell_alerts(self, exp: Experiment, trial_id: int, events: list[Event]) -> None:
        try:
            self.notifier.trial_alerts(exp, trial_id, [ev.body for ev in events])
        except Exception:  # an alert that cannot be sent must not fail the ingest
            log.exception("alerts of trial %d were not sent to the webhooks", trial_id)

    def handle(self, op: str, args: dict[str, Any]) -> Any:
        """One request of the CLI's (``hpcdet.daemon.requests``)."""
        return self.commands.handle(op, args)

    def reconcile(self) -> None:
        """Catch up with the run tree and the scheduler after a start or a crash."""
        self.guard.new_round()
        self.site.read()
        applied = 0
        # Catching up with a large run tree can outlast a lease: the heartbeat goes on, and a
        # daemon taken over meanwhile stops before it submits or cancels anything.
        for exp_id in self.journal.experiment_ids():
            if not self.heartbeat():
                return
            with self.guard(exp_id, "replaying its journal", deferrable=False):
                applied += self.journal.replay(exp_id)
        applied += self.journal.replay_registry()
        log.info("journal replay applied %d entries", applied)
        for exp in self.store.experiments(unfinished=True):
            if exp.state in RUNNING_EXPERIMENT_STATES:  # a stopping one's search has ended
                with self.guard(exp.id, "restarting the search", deferrable=False):
                    self.search.start(exp, self.configs.get(exp))

        def ingest(run: Run) -> None:
            if self.heartbeat():
                self.ingestion.ingest(run)

        # A rebuilt database has every event log still to read.
        self.guard.each_run("ingest", ingest, self.store.runs())
        if not self.heartbeat():
            return
        self.ingestion.report_exits()
        self._poll()

    def tick(self, sweep: bool = True) -> None:
        """One round. ``sweep``: look at every live run (its event log, exit file and control
        file); otherwise at those that rang the bell, and after a poll at those it says ended.
        The passes over experiments (trial exits for the searcher, final states) run when
        something may have changed: a sweep, a ring, a poll or a decision since they last ran.
        """
        now = time.time()
        if self.idle and self.journal.recorded == self.passed and not req.waiting(self.paths):
            # Nothing lives and nothing is unfinished: only a request (or a decision of the
            # daemon's own) can change that.
            self.last_tick = now
            self.write_status([])
            return
        self.guard.new_round()
        req.serve_pending(self.paths, self.handle)
        began = time.perf_counter()
        rung = self.run_bell.take()
        poll = now - self.jobs.last_poll >= self.poll_spacing() and (
            self.store.any_live_run()
            # and while a search waits for its next array to be due
            or any(e.state == ExperimentState.ACTIVE
                   for e in self.store.experiments(unfinished=True)))
        live = self.store.live_runs(None if sweep or poll else rung)
        read = self.journal.recorded
        self.ingestion.ingest_all(
            live if sweep else [r for r in live if (r.trial_id, r.run_id) in rung])
        polled = time.perf_counter()
        if poll:
            self.site.refresh()  # at least hourly: a cluster changes under a long search
            self._poll()
        polled = time.perf_counter() - polled  # the scheduler's time, not the sweep's
        # The runs as read above: what the steps between change (offsets, a poll's pending or
        # running) is not what ends a run, and a run this tick misses, the next one sees. A
        # run's exit file rings the bell, so between sweeps only the runs that rang and those
        # the scheduler says have ended are looked at.
        self.guard.each_run("ending a run", self.run_ends.check, live if sweep else [
            r for r in live if (r.trial_id, r.run_id) in rung or self.jobs.ended(r.job_id)])
        passes = sweep or bool(rung) or poll or self.journal.recorded != self.passed
        if passes:
            self.passed = self.journal.recorded
            self.ingestion.report_exits()
        # What a control file says changes with decisions, which are journaled, and with what
        # a sweep reads (a run's start, the experiment's best validation).
        if sweep or self.journal.recorded != self.synced:
            self.synced = self.journal.recorded
            self.controls.sync_all(live if sweep and self.journal.recorded == read else None)
        if sweep:
            spent = time.perf_counter() - began - polled
            self.next_sweep = time.time() + min(MAX_SWEEP_SECONDS,
                                                max(TICK_SECONDS, spent / SWEEP_SHARE))
        self.controls.escalate()
        # What submission goes by changes with decisions and requests (journaled) and with
        # polls; a submission the rate limit held back is tried again at the next poll.
        if passes or self.journal.recorded != self.passed:
            self.submission.submit_queued()
            for exp in self.store.experiments(unfinished=True):
                with self.guard(exp.id, "finishing"):
                    self.finisher.finish(exp)
        self.last_tick = time.time()
        if sweep or passes:  # otherwise nothing that makes the daemon idle or busy happened
            # No live run can ring, and only a request can make one.
            self.idle = not live and not self.controls.preempt_asked and (
                not self.store.any_unfinished_experiment())
            self.write_status([r.job_id for r in live if r.job_id]
                              if sweep and self.journal.recorded == read else None)

    def _poll(self) -> None:
        began = time.process_time()
        if not self.jobs.poll():
            return
        self.submission.refuse_never_running()
        self.queue.order()
        if self.submission.unsettled:
            # What the last daemon left half-submitted, or what the scheduler refused for now
            # (it may have taken it all the same).
            self.submission.settle()
        self.poll_cost = time.process_time() - began

    def poll_spacing(self) -> float:
        """Seconds from one poll to the next (POLL_SHARE)."""
        return max(self.jobs.poll_interval,
                   min(MAX_POLL_SECONDS, self.poll_cost / self.poll_share))

    # ---------------------------------------------------------------- status for the CLI

    def _faults(self) -> list[dict[str, Any]]:
        """The experiments' steps skipped for an I/O error and retried (``Guard``), for
        `daemon status` and `experiment describe`."""
        faults = self.guard.current_faults()
        if not faults:
            return []
        unfinished = {e.id for e in self.store.experiments(unfinished=True)}
        return [f.to_dict() for f in faults if f.experiment_id in unfinished]

    def _unreachable(self) -> dict[str, Any]:
        """Since when the scheduler has not answered, for `daemon status` here and (through
        the heartbeat) on every other host."""
        if self.jobs.unreachable_since is None:
            return {}
        return {"scheduler_unreachable": {
            "since": self.jobs.unreachable_since, "polls": self.jobs.failed_polls,
            "error": self.jobs.unreachable_error}}

    def write_status(self, live_jobs: list[str] | None = None) -> None:
        """``live_jobs``: the live runs' jobs, if the caller has just read them."""
        live_jobs = self.store.live_job_ids() if live_jobs is None else live_jobs
        status = {
            "pid": os.getpid(), "host": hostname(), "started": self.started,
            "last_tick": self.last_tick, "last_poll": self.jobs.last_poll,
            "last_decision": self.last_decision, "lease": self.lease.generation,
            **self._unreachable(),
            "polls": self.jobs.polls, "scheduler_calls": dict(self.runner.calls),
            "backend": self.backend, "live_jobs": live_jobs,
            "database": str(self.store.path), "state_dir": str(self.paths.root),
            "stopping": self.stopping,
            "submissions_held": self.submission.held_reason, "version": __version__,
            "faults": self._faults(), "webhook_failures": self.notifier.deliverer.failures(),
        }
        # Rewritten every sweep, and at every start: not worth forcing to disk each time.
        write_atomic(self.local_dir / STATUS_FILE, status, durable=False, mode=0o600)
        self.heartbeat()
