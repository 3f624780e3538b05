"""What trials report, into the database and on to the searcher: each run's new events are
stored exactly once, and the searcher hears of validations (0.38), completed operations
(0.37) and trials that ended."""

from __future__ import annotations

from pathlib import Path

from hpcdet.config import ExperimentConfig
from hpcdet.daemon.configs import Configs
from hpcdet.daemon.guard import Guard
from hpcdet.daemon.searching import SearchDriver, searcher_source
from hpcdet.paths import StatePaths
from hpcdet.rundir.exchange import Event, read_events
from hpcdet.rundir.layout import EVENTS_FILE
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
from hpcdet.states import FINAL_TRIAL_STATES, LIVE_RUN_STATES, RUNNING_EXPERIMENT_STATES, TrialState
from hpcdet.store.ingest import BestOf
from hpcdet.store.models import Experiment, Run, Trial
from hpcdet.store.repository import Store


class Feed:
    def __init__(self, store: Store, paths: StatePaths, configs: Configs, search: SearchDriver,
                 guard: Guard) -> None:
        self.store = store
        self.paths = paths
        self.configs = configs
        self.search = search
        self.guard = guard
        # (trial, run): the last event this daemon has considered feeding to the searcher
        self.considered: dict[tuple[int, int], int] = {}

    def ingest(self, run: Run) -> None:
        exp_id = self.store.experiment_of(run.trial_id)
        path = self.paths.run(exp_id, run.trial_id, run.run_id) / EVENTS_FILE
        # The loop asks of every live run every tick: one whose log has not grown since
        # ``run`` was read, and whose stored events the searcher has all heard, costs a stat.
        heard = self.considered.get((run.trial_id, run.run_id), run.searcher_seq)
        if _size(path) == run.event_offset and heard >= run.event_seq:
            return
        trial = self.store.trial(run.trial_id)
        exp = self.store.experiment(exp_id)
        cfg = self.configs.get(exp)
        best = BestOf(cfg.searcher.metric, cfg.searcher.smaller_is_better)
        new = self.store.ingest_events(trial.id, run.run_id, path, best)
        self._feed_trial_events(exp, cfg, trial, run.run_id, path, new)

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
        self, exp: Experiment, cfg: ExperimentConfig, trial: Trial, run_id: int, path: Path,
        new: list[Event],
    ) -> None:
        """Feed the searcher what it decides on: validations (0.38) and completed ops (0.37).

        What is fed follows what is stored (``Run.event_seq``) against what the searcher has
        considered, not what one ingest returned: after a start, events a killed daemon stored
        but never fed are read again from the log.
        """
        if exp.searcher_done or exp.state not in RUNNING_EXPERIMENT_STATES:
            return
        run = self.store.run(trial.id, run_id)
        if run is None:
            return
        key = (trial.id, run_id)
        seen = self.considered.get(key, run.searcher_seq)
        if seen >= run.event_seq:
            return
        if run.state in LIVE_RUN_STATES and (not new or new[0].seq > seen + 1):
            new = read_events(path, 0)
        wants_validations = bool(cfg.searcher.time_metric)
        for ev in new:
            if not seen < ev.seq <= run.event_seq:
                continue
            source = searcher_source(trial.id, run_id, ev.seq)
            if ev.type == "metrics" and ev.body["group"] == "validation" and wants_validations:
                event: SearchEvent = ValidationReported(trial.request_id, ev.body["metrics"])
            elif ev.type == "searcher_completed":
                event = OpCompleted(trial.request_id, ev.body["length"], ev.body["metric"])
            else:
                continue
            self.search.feed(exp, cfg, event, source)
            exp = self.store.experiment(exp.id)
            if exp.searcher_done:
                return
        self.considered[key] = run.event_seq

    def _report_exits_of(self, exp: Experiment) -> None:
        cfg = self.configs.get(exp)
        for trial in self.store.trials(exp.id):
            if trial.state in FINAL_TRIAL_STATES and not trial.exit_reported:
                self.search.feed(exp, cfg, TrialExited(trial.request_id, _exit_reason(trial)),
                                 {"exited_trial_id": trial.id})
                exp = self.store.experiment(exp.id)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _exit_reason(trial: Trial) -> str:
    if trial.state == TrialState.ERROR:
        return EXIT_ERRORED
    if trial.state == TrialState.CANCELED:
        return EXIT_CANCELED
    return {"INVALID_HP": EXIT_INVALID_HP, "USER_REQUESTED_STOP": EXIT_USER_STOP}.get(
        trial.early_exit, EXIT_COMPLETED)
