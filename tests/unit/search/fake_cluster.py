"""A deterministic fake cluster: turns a searcher's decisions into later events.

Trials behave by mode:

* ``validations`` (0.38 ASHA): report ``{loss, batches}`` every ``every`` batches up to
  ``max_time``; a stopped trial exits (completed) on its next step, as preemption makes it.
* ``ops`` (0.37): complete each ``ValidateAfter`` with ``OpCompleted``; a trial without an
  operation waits (it is not running) until it is promoted or closed; a closed trial exits.
* ``plain`` (random, grid): report one validation (ignored by the searcher), then exit.

Each trial has a fate drawn at creation: usually ``completed``, sometimes errored, invalid
hyperparameters, user stop or canceled, which ends it early. Which trial acts next is drawn
from the cluster's own ``random.Random(seed)``, so one seed gives one event sequence.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from hpcdet.config.searcher import SearcherConfig
from hpcdet.search import (
    EXIT_CANCELED,
    EXIT_COMPLETED,
    EXIT_ERRORED,
    EXIT_INVALID_HP,
    EXIT_USER_STOP,
    Action,
    Close,
    Create,
    Event,
    Initialize,
    OpCompleted,
    Searcher,
    Shutdown,
    Stop,
    TrialExited,
    ValidateAfter,
    ValidationReported,
    event_from_dict,
    event_to_dict,
)

EARLY = [EXIT_ERRORED, EXIT_INVALID_HP, EXIT_USER_STOP, EXIT_CANCELED]
FATES = [EXIT_COMPLETED] * 14 + EARLY
HARSH_FATES = [EXIT_COMPLETED] * 4 + EARLY


def loss(request_id: int, length: int) -> float:
    """Coarse (so that ties happen) and improving with length."""
    return round(((request_id * 37) % 11) / 10 + 10 / (length + 1), 1)


@dataclass
class _Trial:
    request_id: int
    fate: str
    fail_after: int  # steps before an early fate strikes
    ops: list[int] = field(default_factory=list)
    closed: bool = False
    stopped: bool = False
    batches: int = 0
    steps: int = 0
    reported: bool = False


@dataclass
class Run:
    events: list[Event]
    decisions: list[list[Action]]


class FakeCluster:
    def __init__(self, searcher: Searcher, *, seed: int, mode: str, fates: list[str] = FATES,
                 max_time: int = 100, every: int = 10) -> None:
        self.searcher = searcher
        self.fates = fates
        self.rng = random.Random(seed)
        self.mode = mode
        self.max_time = max_time
        self.every = every
        self.trials: dict[int, _Trial] = {}
        self.live: list[int] = []
        self.over = False

    def _apply(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Create):
                fate = self.rng.choice(self.fates)
                self.trials[action.request_id] = _Trial(
                    action.request_id, fate, self.rng.randint(0, 4))
                self.live.append(action.request_id)
            elif isinstance(action, ValidateAfter):
                self.trials[action.request_id].ops.append(action.length)
            elif isinstance(action, Close):
                self.trials[action.request_id].closed = True
            elif isinstance(action, Stop):
                self.trials[action.request_id].stopped = True
            elif isinstance(action, Shutdown):
                self.over = True

    def _can_act(self, trial: _Trial) -> bool:
        return self.mode != "ops" or bool(trial.ops) or trial.closed

    def _exit(self, trial: _Trial, reason: str) -> Event:
        self.live.remove(trial.request_id)
        return TrialExited(trial.request_id, reason)

    def _step(self, trial: _Trial) -> Event:
        trial.steps += 1
        if trial.fate != EXIT_COMPLETED and trial.steps > trial.fail_after:
            return self._exit(trial, trial.fate)
        return {"validations": self._validations, "ops": self._ops, "plain": self._plain}[
            self.mode](trial)

    def _validations(self, trial: _Trial) -> Event:
        if trial.stopped or trial.batches >= self.max_time:
            return self._exit(trial, EXIT_COMPLETED)
        trial.batches += self.every
        metrics = {"loss": loss(trial.request_id, trial.batches), "batches": trial.batches}
        return ValidationReported(trial.request_id, metrics)

    def _ops(self, trial: _Trial) -> Event:
        if trial.ops:
            length = trial.ops.pop(0)
            return OpCompleted(trial.request_id, length, loss(trial.request_id, length))
        return self._exit(trial, EXIT_COMPLETED)

    def _plain(self, trial: _Trial) -> Event:
        if not trial.reported:
            trial.reported = True
            return ValidationReported(trial.request_id, {"loss": loss(trial.request_id, 1)})
        return self._exit(trial, EXIT_COMPLETED)

    def run(self, limit: int = 100_000) -> Run:
        events: list[Event] = [Initialize()]
        decisions = [self.searcher.feed(events[0])]
        self._apply(decisions[0])
        while not self.over and len(events) < limit:
            ready = [r for r in self.live if self._can_act(self.trials[r])]
            if not ready:
                break
            event = self._step(self.trials[self.rng.choice(ready)])
            events.append(event)
            decisions.append(self.searcher.feed(event))
            self._apply(decisions[-1])
        return Run(events, decisions)


def journaled(events: list[Event]) -> list[Event]:
    """The events as the daemon's journal gives them back (JSON round trip)."""
    return [event_from_dict(json.loads(json.dumps(event_to_dict(e)))) for e in events]


def assert_restartable(
    config: SearcherConfig, hparams: dict[str, Any], seed: int, run: Run
) -> None:
    """For every k, ``Searcher.replay`` of the first k journaled events decides exactly what
    the uninterrupted searcher did for the remaining events."""
    stored = journaled(run.events)
    for k in range(1, len(stored) + 1):
        searcher = Searcher.replay(config, hparams, seed, stored[:k])
        for j in range(k, len(stored)):
            assert searcher.feed(stored[j]) == run.decisions[j], f"replayed {k}, event {j}"
