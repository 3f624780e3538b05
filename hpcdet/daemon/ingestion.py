"""What trials report, into the database and on to the searcher: each run's new events are
stored exactly once, and the searcher hears of validations (0.38), completed operations
(0.37) and trials that ended."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable

from hpcdet.config import ExperimentConfig
from hpcdet.daemon.configs import Configs
from hpcdet.daemon.guard import Guard
from hpcdet.daemon.searching import SearchDriver, searcher_source
from hpcdet.errors import StoreError
from hpcdet.paths import StatePaths
from hpcdet.records import ExperimentRecord as Experiment
from hpcdet.records import LiveRun
from hpcdet.records import RunRecord as Run
from hpcdet.records import TrialRecord as Trial
from hpcdet.rundir.events import Event, EventBatch, iter_events
from hpcdet.rundir.layout import run_files
from hpcdet.search.base import (
    EXIT_CANCELED,
    EXIT_COMPLETED,
    EXIT_ERRORED,
    EXIT_INVALID_HP,
    EXIT_USER_STOP,
    OpCompleted,
    TrialExited,
    ValidationReported,
)
from hpcdet.search.base import Event as SearchEvent
from hpcdet.states import LIVE_RUN_STATES, RUNNING_EXPERIMENT_STATES, TrialState
from hpcdet.store.ingest import BestOf
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)
# Told of the alerts (core_context.alert) an ingest stored: experiment, trial id, the events.
AlertListener = Callable[[Experiment, int, list[Event]], None]


class Ingestion:
    def __init__(self, store: Store, paths: StatePaths, configs: Configs, search: SearchDriver,
                 guard: Guard) -> None:
        self.store = store
        self.paths = paths
        self.configs = configs
        self.search = search
        self.guard = guard
        # (trial, run): the last event this daemon has considered feeding to the searcher
        self.considered: dict[tuple[int, int], int] = {}
        self.on_alerts: AlertListener | None = None

    def ingest_all(self, runs: list[LiveRun]) -> None:
        """Store the new events of every run given (the live ones, each tick), in one
        transaction; then feed each run's to its searcher."""
        # The loop asks of every live run every tick: one whose log has not grown since
        # ``run`` was read, and whose stored events the searcher has all heard, costs a stat.
        # Each run's log path found once a tick: the loop does this for every live run.
        logs = {(run.trial_id, run.run_id): self._events_file(run) for run in runs}
        due: list[LiveRun] = []

        def check(run: LiveRun) -> None:
            if self._due(run, logs[(run.trial_id, run.run_id)]):
                due.append(run)

        # A log that cannot be read is its run's fault (Guard): the others are read. A step
        # of its own, so that ingesting or feeding its run that keeps failing is not taken
        # for passed because its log could be read.
        self.guard.each_run("reading an event log", check, runs)
        if not due:
            return
        exps = {e.id: e for e in self.store.experiments(unfinished=True)}
        of_exp: dict[int, tuple[Experiment, ExperimentConfig, BestOf]] = {}
        for exp_id in sorted({run.experiment_id for run in due}):
            with self.guard(exp_id, "ingest"):
                of_exp[exp_id] = self._experiment(exp_id, exps)
        due = [run for run in due if run.experiment_id in of_exp]
        try:
            new = self.store.ingest_runs([
                (run.trial_id, run.run_id, logs[(run.trial_id, run.run_id)],
                 of_exp[run.experiment_id][2])
                for run in due])
        except StoreError:
            raise
        except Exception:
            # Something in one run's events: each alone, so that it fails only its experiment.
            log.warning("ingesting %d runs together failed; ingesting each alone", len(due),
                        exc_info=True)
            self.guard.each_run("ingest", lambda run: self.ingest(run, exps), due)
            return

        def feed(run: LiveRun) -> None:
            exp, cfg, _ = of_exp[run.experiment_id]
            exp = exps.get(exp.id, exp)
            self._tell_alerts(exp, run, new[(run.trial_id, run.run_id)])
            exps[exp.id] = self._feed_trial_events(exp, cfg, run, logs[(run.trial_id, run.run_id)],
                                                   new[(run.trial_id, run.run_id)])

        self.guard.each_run("ingest", feed, due)

    def ingest(self, run: Run | LiveRun, exps: dict[int, Experiment] | None = None) -> None:
        """Store all the run's new events, a batch at a time (a run's end, a rebuilt database:
        what is decided next needs all of them; a sweep takes a batch a run). ``exps``: the
        experiments as last read, kept current."""
        path = self._events_file(run)
        if not self._due(run, path):
            return
        exps = {} if exps is None else exps
        exp, cfg, best = self._experiment(self.store.experiment_of(run.trial_id), exps)
        offset = -1
        while True:
            new = self.store.ingest_events(run.trial_id, run.run_id, path, best)
            self._tell_alerts(exp, run, new)
            exp = exps[exp.id] = self._feed_trial_events(exp, cfg, run, path, new)
            if new.end_offset == offset:  # nothing more to read (a torn last line at most)
                return
            offset = new.end_offset

    def _tell_alerts(self, exp: Experiment, run: Run | LiveRun, new: EventBatch) -> None:
        alerts = [ev for ev in new.others if ev.type == "alert"]
        if alerts and self.on_alerts is not None:
            self.on_alerts(exp, run.trial_id, alerts)

    def _due(self, run: Run | LiveRun, path: str) -> bool:
        """Whether the run's log has grown since ``run`` was read, or the searcher has not
        heard all its stored events."""
        heard = self.considered.get((run.trial_id, run.run_id), run.searcher_seq)
        return _size(path) != run.event_offset or heard < run.event_seq

    def _events_file(self, run: Run | LiveRun) -> str:
        exp_id = self.store.experiment_of(run.trial_id)
        return run_files(self.paths.run(exp_id, run.trial_id, run.run_id)).events

    def _experiment(self, exp_id: int, exps: dict[int, Experiment]
                    ) -> tuple[Experiment, ExperimentConfig, BestOf]:
        """The experiment (as last read), its config, and what makes its trials' best."""
        exp = exps.get(exp_id) or self.store.experiment(exp_id)
        cfg = self.configs.get(exp)
        return exp, cfg, BestOf(cfg.searcher.metric, cfg.searcher.smaller_is_better)

    def report_exits(self) -> None:
        """Tell each search about its trials that became final (once per trial)."""
        for exp in self.store.experiments(unfinished=True):
            if exp.searcher_done or exp.state not in RUNNING_EXPERIMENT_STATES:
                continue
            with self.guard(exp.id, "reporting trial exits to the searcher"):
                self._report_exits_of(exp)

    def forget(self, key: tuple[int, int]) -> None:
        """The run (trial, run) has ended."""
        self.considered.pop(key, None)

    def _feed_trial_events(
        self, exp: Experiment, cfg: ExperimentConfig, run: Run | LiveRun, path: str,
        new: EventBatch,
    ) -> Experiment:
        """Feed the searcher what it decides on: validations (0.38) and completed ops (0.37);
        returns the experiment as it is afterwards.

        What is fed follows what is stored (``Run.event_seq``) against what the searcher has
        considered, not what one ingest returned: after a start, events a killed daemon stored
        but never fed are read again from the log.
        """
        if exp.searcher_done or exp.state not in RUNNING_EXPERIMENT_STATES:
            return exp
        key = (run.trial_id, run.run_id)
        seen = self.considered.get(key, run.searcher_seq)
        # A searcher that does not read validations decides only on completed operations,
        # which are never metrics lines.
        wants_validations = bool(cfg.searcher.time_metric)
        events: Iterable[Event] = new.events if wants_validations else new.others
        if new.first_seq == seen + 1 and new.last_seq is not None:
            stored = new.last_seq  # what this ingest stored follows what was heard
        else:
            # Otherwise ask the store what it holds, and read the log again if need be.
            current = self.store.run(run.trial_id, run.run_id)
            if current is None:
                return exp
            seen = self.considered.get(key, current.searcher_seq)
            stored = current.event_seq
            if seen >= stored:
                return exp
            if current.state in LIVE_RUN_STATES:
                events = iter_events(path, 0)
        decisive = [ev for ev in events if seen < ev.seq <= stored and (
            ev.type == "searcher_completed" or (wants_validations and ev.type == "metrics"
                                                and ev.body["group"] == "validation"))]
        request_id = self.store.trial(run.trial_id).request_id if decisive else 0
        for ev in decisive:
            source = searcher_source(run.trial_id, run.run_id, ev.seq)
            if ev.type == "searcher_completed":
                event: SearchEvent = OpCompleted(request_id, ev.body["length"], ev.body["metric"])
            else:
                event = ValidationReported(request_id, ev.body["metrics"])
            self.search.feed(exp, cfg, event, source)
            exp = self.store.experiment(exp.id)
            if exp.searcher_done:
                return exp
        self.considered[key] = stored
        return exp

    def _report_exits_of(self, exp: Experiment) -> None:
        cfg = self.configs.get(exp)
        for trial in self.store.unreported_exits(exp.id):
            self.search.feed(exp, cfg, TrialExited(trial.request_id, _exit_reason(trial)),
                             {"exited_trial_id": trial.id})
            exp = self.store.experiment(exp.id)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def _exit_reason(trial: Trial) -> str:
    if trial.state == TrialState.ERROR:
        return EXIT_ERRORED
    if trial.state == TrialState.CANCELED:
        return EXIT_CANCELED
    return {"INVALID_HP": EXIT_INVALID_HP, "USER_REQUESTED_STOP": EXIT_USER_STOP}.get(
        trial.early_exit, EXIT_COMPLETED)
