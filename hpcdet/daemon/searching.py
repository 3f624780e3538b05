"""Driving a searcher from the daemon: journaled inputs, decisions carried out exactly once.

Every input is journaled before it is fed. Decisions are numbered in the order the searcher
makes them, and carrying out decision k journals its effect with ``action_index=k``. After a
restart the searcher is rebuilt by feeding it the journaled inputs again; the decisions it
makes from index ``Experiment.actions_done`` on were never carried out, and are now. An input
and the decisions it causes are journaled in one append (``Journal.record_all``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpcdet.config import ExperimentConfig
from hpcdet.daemon.journal import Journal
from hpcdet.records import ExperimentRecord as Experiment
from hpcdet.search import Searcher
from hpcdet.search.base import (
    Action,
    Close,
    Create,
    Event,
    Initialize,
    Shutdown,
    Stop,
    ValidateAfter,
    event_from_dict,
    event_to_dict,
)
from hpcdet.store.entries import (
    Entry,
    OpIssued,
    SearcherEventFed,
    SearcherShutdown,
    TrialClosed,
    TrialCreated,
    TrialStopped,
)
from hpcdet.store.repository import Store


@dataclass
class _Search:
    searcher: Searcher
    actions: list[Action] = field(default_factory=list)
    inputs: int = 0  # journaled events fed so far


class SearchDriver:
    def __init__(self, store: Store, journal: Journal) -> None:
        self.store = store
        self.journal = journal
        self._searches: dict[int, _Search] = {}

    def _search(self, exp: Experiment, cfg: ExperimentConfig) -> _Search:
        found = self._searches.get(exp.id)
        if found is None:
            found = _Search(Searcher(cfg.searcher, cfg.hyperparameters, cfg.experiment_seed))
            events = [event_from_dict(e) for e in self.store.searcher_events(exp.id)]
            for event in events:
                found.actions.extend(found.searcher.feed(event))
            found.inputs = len(events)
            self._searches[exp.id] = found
        return found

    def bound(self, exp: Experiment, cfg: ExperimentConfig) -> tuple[int, int]:
        """(most trials the search can create, its concurrency)."""
        searcher = self._search(exp, cfg).searcher
        return searcher.trial_count_bound(), searcher.concurrency()

    def feed(
        self, exp: Experiment, cfg: ExperimentConfig, event: Event, source: dict[str, int] | None
    ) -> None:
        """Journal ``event`` (``source``: trial_id, run_id, seq of the trial event behind it),
        feed it, and carry out the decisions it causes."""
        search = self._search(exp, cfg)
        try:
            search.actions.extend(search.searcher.feed(event))
            search.inputs += 1
            fed = SearcherEventFed(event=event_to_dict(event),
                                   progress=search.searcher.progress(), **(source or {}))
            self.journal.record_all(exp.id, [fed, *self._entries(exp.id, search)])
        except Exception:
            self.forget(exp.id)  # it may have half taken the event: rebuild it from the journal
            raise

    def start(self, exp: Experiment, cfg: ExperimentConfig) -> None:
        """Start a new search, or carry out what a killed daemon's search decided and did not
        do; a daemon killed between creating the experiment and starting it started nothing."""
        if self._search(exp, cfg).inputs == 0:
            self.feed(exp, cfg, Initialize(), None)
        else:
            self.carry_out(exp, cfg)

    def carry_out(self, exp: Experiment, cfg: ExperimentConfig) -> None:
        """Carry out every decision not yet carried out (all of them after a crash)."""
        self.journal.record_all(exp.id, self._entries(exp.id, self._search(exp, cfg)))

    def _entries(self, exp_id: int, search: _Search) -> list[Entry]:
        """The journal entries that carry out the decisions not yet carried out, in order, as
        each would be recorded after the ones before it had been applied."""
        done = self.store.experiment(exp_id).actions_done
        entries: list[Entry] = []
        next_trial = 0
        ops: dict[int, int | None] = {}  # a trial's operations so far, by request; None: no trial
        for index in range(done, len(search.actions)):
            action = search.actions[index]
            if isinstance(action, Create):
                next_trial = next_trial or self.journal.max_ids()[1] + 1
                entries.append(TrialCreated(
                    trial_id=next_trial, request_id=action.request_id, hparams=action.hparams,
                    trial_seed=action.trial_seed, action_index=index))
                next_trial += 1
                ops[action.request_id] = 0
            elif isinstance(action, ValidateAfter):
                if action.request_id not in ops:
                    ops[action.request_id] = self._ops(exp_id, action.request_id)
                issued = ops[action.request_id]
                entries.append(OpIssued(
                    request_id=action.request_id, length=action.length, op_index=issued or 0,
                    action_index=index))
                if issued is not None:
                    ops[action.request_id] = issued + 1
            elif isinstance(action, Close):
                entries.append(TrialClosed(request_id=action.request_id, action_index=index))
            elif isinstance(action, Stop):
                entries.append(TrialStopped(request_id=action.request_id, action_index=index))
            elif isinstance(action, Shutdown):
                entries.append(SearcherShutdown(
                    failure=action.failure, message=action.message, action_index=index))
            else:  # pragma: no cover - the Action union is closed
                raise TypeError(f"unknown searcher decision {action!r}")
        return entries

    def _ops(self, exp_id: int, request_id: int) -> int | None:
        """How many operations the trial of a request has been issued; None: it has no trial."""
        for t in self.store.trials(exp_id):
            if t.request_id == request_id:
                return len(t.ops)
        return None

    def forget(self, exp_id: int) -> None:
        self._searches.pop(exp_id, None)


def searcher_source(trial_id: int, run_id: int, seq: int) -> dict[str, Any]:
    return {"trial_id": trial_id, "run_id": run_id, "seq": seq}
