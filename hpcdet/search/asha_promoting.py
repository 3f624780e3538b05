"""One bracket of 0.37 ASHA, driven by operations: ``ValidateAfter`` out, ``OpCompleted`` in.

Promotion-based (default): a trial's metric for rung r goes into the rung's sorted list (ties
go AFTER equal metrics). With ``old = int(len / d)`` and ``new = int((len + 1) / d)`` before the
insert, the trial is promoted at once when its index is below ``new``; otherwise, when ``new !=
old``, the trial at index ``old`` (after the insert) is promoted unless it already was.
Promotion is ``ValidateAfter(units of rung r + 1)``; a promoted trial that had exited early is
treated as reporting the worst metric at once. A report that adds no training creates a new
trial while the bracket has fewer than ``max_trials`` (invalid-hyperparameter trials aside).
Top-rung trials are closed. Once ``max_trials`` metrics are in rung 0, rungs with no trial still
training are closed out in order (every unpromoted trial gets ``Close``), up to the first rung
that still has one.

``stop_once`` variant: ``numPromote = max(int((len + 1) / d), 1)``, ties go BEFORE equal metrics,
and the reporting trial is promoted or closed immediately.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from hpcdet.search.base import EXIT_COMPLETED, EXIT_INVALID_HP, Action, Close, ValidateAfter
from hpcdet.search.brackets import initial_trials
from hpcdet.search.method import EXITED_METRIC, SearchMethod, TrialFactory, completed_metric


@dataclass
class _Entry:
    request_id: int
    metric: float
    promoted: bool = False


@dataclass
class _Rung:
    units: int
    entries: list[_Entry] = field(default_factory=list)
    outstanding: int = 0  # trials training towards this rung

    def index_after(self, metric: float) -> int:
        return bisect.bisect_right([e.metric for e in self.entries], metric)

    def index_before(self, metric: float) -> int:
        return bisect.bisect_left([e.metric for e in self.entries], metric)


@dataclass(frozen=True)
class PromotingBracketConfig:
    metric: str
    smaller_is_better: bool
    units: list[int]
    max_trials: int
    max_concurrent_trials: int
    divisor: float
    stop_once: bool


class PromotingBracket(SearchMethod):
    def __init__(self, trials: TrialFactory, config: PromotingBracketConfig) -> None:
        self._trials = trials
        self._cfg = config
        self._rungs = [_Rung(units) for units in config.units]
        self._rung_of: dict[int, int] = {}  # every trial created, invalid ones included
        self._pending: dict[int, int] = {}  # trial -> length of its outstanding ValidateAfter
        self._early_exit: set[int] = set()
        self._closed: set[int] = set()  # closed by the searcher, or final
        self._invalid = 0
        self._completed = 0

    # ---- decisions ----------------------------------------------------------------------------

    def _train(self, request_id: int, rung: int) -> ValidateAfter:
        self._rung_of[request_id] = rung
        self._rungs[rung].outstanding += 1
        length = self._rungs[rung].units
        self._pending[request_id] = length
        return ValidateAfter(request_id, length)

    def _create(self) -> list[Action]:
        create = self._trials.create()
        return [create, self._train(create.request_id, 0)]

    def _under_budget(self) -> bool:
        return len(self._rung_of) - self._invalid < self._cfg.max_trials

    def initial(self) -> list[Action]:
        cfg = self._cfg
        count = initial_trials(cfg.max_concurrent_trials, cfg.max_trials, cfg.divisor,
                               len(self._rungs))
        return [a for _ in range(count) for a in self._create()]

    def _promotions(self, rung: _Rung, request_id: int, metric: float) -> list[int]:
        divisor = self._cfg.divisor
        if self._cfg.stop_once:
            cutoff = max(int(float(len(rung.entries) + 1) / divisor), 1)
            index = rung.index_before(metric)
            rung.entries.insert(index, _Entry(request_id, metric, index < cutoff))
            return [request_id] if index < cutoff else []
        old = int(float(len(rung.entries)) / divisor)
        new = int(float(len(rung.entries) + 1) / divisor)
        index = rung.index_after(metric)
        rung.entries.insert(index, _Entry(request_id, metric, index < new))
        if index < new:
            return [request_id]
        if new != old and not rung.entries[old].promoted:
            rung.entries[old].promoted = True
            return [rung.entries[old].request_id]
        return []

    def _report(self, request_id: int, metric: float) -> list[Action]:
        r = self._rung_of[request_id]
        rung = self._rungs[r]
        rung.outstanding -= 1
        actions: list[Action] = []
        trained = False
        if r == len(self._rungs) - 1:
            rung.entries.append(_Entry(request_id, metric))
            if request_id not in self._early_exit:
                actions.append(Close(request_id))
                self._closed.add(request_id)
        elif self._cfg.stop_once:
            promoted = self._promotions(rung, request_id, metric)
            if request_id in self._early_exit:
                pass  # its (worst) metric is recorded; an exited trial goes no further
            elif promoted:
                actions.append(self._train(request_id, r + 1))
                trained = True
            else:
                actions.append(Close(request_id))
                self._closed.add(request_id)
        else:
            for pid in self._promotions(rung, request_id, metric):
                if pid in self._early_exit:
                    # An exited trial cannot train: it reports the worst metric at once.
                    self._rung_of[pid] = r + 1
                    self._rungs[r + 1].outstanding += 1
                    return self._report(pid, EXITED_METRIC)
                actions.append(self._train(pid, r + 1))
                trained = True
        if not trained and self._under_budget():
            actions.extend(self._create())
        if not self._cfg.stop_once and len(self._rungs[0].entries) == self._cfg.max_trials:
            actions.extend(self._close_out())
        return actions

    def _close_out(self) -> list[Action]:
        actions: list[Action] = []
        for rung in self._rungs:
            if rung.outstanding > 0:
                break
            for entry in rung.entries:
                if not entry.promoted and entry.request_id not in self._closed:
                    actions.append(Close(entry.request_id))
                    self._closed.add(entry.request_id)
        return actions

    # ---- events -------------------------------------------------------------------------------

    def op_completed(self, request_id: int, length: int, metric: object) -> list[Action]:
        if self._pending.get(request_id) != length:
            return []  # no such operation outstanding (Determined rejects it at the API)
        value = completed_metric(metric, self._cfg.metric, self._cfg.smaller_is_better)
        del self._pending[request_id]
        return self._report(request_id, value)

    def exited(self, request_id: int, reason: str) -> list[Action]:
        self._completed += 1
        training = self._pending.pop(request_id, None) is not None
        if reason == EXIT_INVALID_HP:
            return self._invalid_hp(request_id, training)
        if training:  # exited before reporting its operation: it ranks last
            self._early_exit.add(request_id)
            self._closed.add(request_id)
            return self._report(request_id, EXITED_METRIC)
        if reason != EXIT_COMPLETED or request_id not in self._closed:
            # Waiting for a promotion it can no longer take: a later promotion ranks it last.
            self._early_exit.add(request_id)
        self._closed.add(request_id)
        return []

    def _invalid_hp(self, request_id: int, training: bool) -> list[Action]:
        self._invalid += 1
        self._early_exit.add(request_id)
        self._closed.add(request_id)
        top = self._rung_of[request_id]
        if training:
            self._rungs[top].outstanding -= 1
        for rung in self._rungs[: top + 1]:
            rung.entries = [e for e in rung.entries if e.request_id != request_id]
        return self._create()  # its replacement does not count against max_trials

    # ---- accounting ---------------------------------------------------------------------------

    def progress(self) -> float:
        reported = len(self._rungs[0].entries)
        total = self._cfg.max_trials
        progress = reported / (1.2 * total)
        if reported == total:
            progress = max(progress, (self._completed - self._invalid) / total)
        return progress

    def trial_count_bound(self) -> int:
        return self._cfg.max_trials

    def concurrency(self) -> int:
        cfg = self._cfg
        return initial_trials(cfg.max_concurrent_trials, cfg.max_trials, cfg.divisor,
                              len(self._rungs))
