"""Experiments as `experiment list` and `experiment describe` show them."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpcdet.paths import StatePaths
from hpcdet.protocol import process
from hpcdet.records import ArrayRecord, ExperimentRecord, RunRecord, TrialRecord, stored_form
from hpcdet.store.reads import Reads, reading
from hpcdet.views import usage

if TYPE_CHECKING:
    from hpcdet.store.queries import Queries


@dataclass(frozen=True)
class BestTrial:
    trial_id: int
    metric: str
    value: float


@dataclass(frozen=True)
class ExperimentRow:
    experiment: ExperimentRecord
    progress: float  # 0..1: the searcher's, or else the share of its trials' work done
    best: BestTrial | None = None
    used: usage.Usage | None = None  # its runs' slot-hours (hpcdet.views.usage)

    def to_dict(self) -> dict[str, Any]:
        """The stable form of ``experiment list --json``."""
        e = self.experiment
        return {"id": e.id, "name": e.name, "state": e.state, "progress": self.progress,
                "description": e.description, "labels": list(e.labels),
                "archived": e.archived, "searcher": e.searcher, "backend": e.backend,
                "resource_pool": e.resource_pool, "priority": e.priority, "weight": e.weight,
                "started": e.created, "ended": e.ended, "error": e.error,
                "usage": self.used.to_dict() if self.used else None}


@dataclass(frozen=True)
class TrialRow:
    trial: TrialRecord
    searcher: str  # what the searcher decided for it (searcher_summary)


@dataclass(frozen=True)
class ExperimentView:
    experiment: ExperimentRecord
    config: dict[str, Any]
    trials: list[TrialRow]
    runs: list[RunRecord]
    arrays: list[ArrayRecord]
    best: BestTrial | None

    @property
    def searcher(self) -> dict[str, Any]:
        searcher: dict[str, Any] = self.config.get("searcher", {})
        return searcher

    @property
    def used(self) -> usage.Usage:
        """The slot-hours of its ended runs, and where the figures came from."""
        return usage.total(self.runs, usage.slots_of(self.config))

    def trial_used(self, trial_id: int) -> usage.Usage:
        return usage.total([r for r in self.runs if r.trial_id == trial_id],
                           usage.slots_of(self.config))

    def run_used(self, run: RunRecord) -> usage.RunUsage | None:
        return usage.run_usage(run, usage.slots_of(self.config))


def experiment_rows(source: Reads | Queries, with_best: bool = False, archived: bool = True,
                    labels: Collection[str] = (), offset: int = 0, limit: int | None = None
                    ) -> list[ExperimentRow]:
    """The experiments with their progress, by id: those ``Reads.experiments`` picks by
    ``archived``, ``labels``, ``offset`` and ``limit`` (every one by default); ``with_best``,
    also their best trial (which needs each config and every trial)."""
    with reading(source) as reads:
        experiments = reads.experiments(config=with_best, archived=archived, labels=labels,
                                        offset=offset, limit=limit)
        # Only the trials of the experiments listed: a page of a long list reads its own.
        work = reads.trial_work(experiments[0].id, experiments[-1].id) if experiments else {}
        runs = reads.runs_between(experiments[0].id, experiments[-1].id) if experiments else {}
        by_exp: dict[int, list[TrialRecord]] = {}
        for t in reads.trials() if with_best and experiments else []:
            by_exp.setdefault(t.experiment_id, []).append(t)
    rows = []
    for exp in experiments:
        count, done = work.get(exp.id, (0, 0.0))
        best = None
        if with_best:
            searcher = exp.stored_config.get("searcher", {})
            best = best_trial(by_exp.get(exp.id, []), searcher.get("metric", ""),
                              searcher.get("smaller_is_better", True))
        slots, exp_runs = runs.get(exp.id, (1, []))
        rows.append(ExperimentRow(exp, exp.progress or done / max(1, count), best,
                                  usage.total(exp_runs, slots)))
    return rows


def describe_experiment(source: Reads | Queries, exp_id: int) -> ExperimentView:
    with reading(source) as reads:
        exp = reads.experiment(exp_id)
        trials = reads.trials(exp_id)
        runs = reads.experiment_runs(exp_id)
        arrays = reads.arrays(exp_id)
    config = exp.stored_config
    searcher = config.get("searcher", {})
    return ExperimentView(
        experiment=exp, config=config,
        trials=[TrialRow(t, searcher_summary(t)) for t in trials], runs=runs, arrays=arrays,
        best=best_trial(trials, searcher.get("metric", ""),
                        searcher.get("smaller_is_better", True)),
    )


def experiment_dict(e: ExperimentRecord) -> dict[str, Any]:
    """The stored row of an experiment without its config (`describe --json`, the web UI)."""
    return stored_form(e)


def best_trial(trials: Sequence[TrialRecord], metric: str, smaller_is_better: bool
               ) -> BestTrial | None:
    """The trial with the best validation of the searcher metric so far (the first on a tie)."""
    scored = [t for t in trials if t.best_validation is not None]
    if not scored:
        return None
    best = (min if smaller_is_better else max)(scored, key=lambda t: t.best_validation or 0.0)
    assert best.best_validation is not None
    return BestTrial(best.id, metric, best.best_validation)


def searcher_summary(t: TrialRecord) -> str:
    """What the searcher decided for the trial: operations (promotions), close, stop."""
    ops = t.ops
    words = []
    if ops:
        words.append("ops " + ",".join(str(o) for o in ops) + f" ({t.ops_completed} done)")
    if t.closed:
        words.append("closed")
    if t.stop_requested:
        words.append("stopped early")
    return "; ".join(words)


@dataclass(frozen=True)
class Sheet:
    """One table of `experiment describe --csv/--outdir`."""

    name: str  # experiments, trials or workloads
    columns: list[str]
    rows: list[list[Any]]


def describe_sheets(store: Queries, exp_ids: list[int], metrics: bool) -> list[Sheet]:
    """Determined's three describe tables over several experiments: the experiments, their
    trials, and their workloads (every metric report and checkpoint, by trial and step; with
    ``metrics``, a column per metric)."""
    exps = [store.experiment(i) for i in exp_ids]
    trials = [t for i in exp_ids for t in store.trials(i)]
    experiments = Sheet("experiments", [
        "Experiment ID", "State", "Progress", "Started", "Ended", "Name", "Description",
        "Archived", "Resource Pool", "Labels"], [
        [e.id, e.state, e.progress, e.created, e.ended, e.name, e.description, e.archived,
         e.resource_pool, ", ".join(sorted(e.labels))] for e in exps])
    trial_sheet = Sheet("trials", [
        "Trial ID", "Experiment ID", "State", "Started", "Ended", "H-Params"], [
        [t.id, t.experiment_id, t.state, t.started, t.ended, json.dumps(t.hparams)]
        for t in trials])
    reports = [(t.id, m) for t in trials for m in store.metrics(t.id)]
    names: list[str] = []
    for _, m in reports if metrics else []:
        names += [k for k in m.metrics if k not in names]
    rows: list[list[Any]] = []
    for trial_id, m in reports:
        values = m.metrics
        rows.append([trial_id, m.steps_completed, m.group, m.reported, "",
                     *[values.get(k, "") for k in names]])
    rows += [[c.trial_id, c.steps_completed, "checkpoint", c.reported, c.uuid,
              *[""] * len(names)] for i in exp_ids for c in store.checkpoints(exp_id=i)]
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    workloads = Sheet("workloads", [
        "Trial ID", "# of Batches", "Kind", "Report Time", "Checkpoint UUID",
        *[f"Metric: {k}" for k in names]], rows)
    return [experiments, trial_sheet, workloads]


@dataclass(frozen=True)
class StepFault:
    """A step of an experiment's that the running daemon skips for an I/O error and tries
    again every round, as its status file says (``hpcdet.daemon.guard.Fault``); if it lasts,
    the experiment ends in ERROR."""

    experiment_id: int
    step: str
    trial_id: int | None
    run_id: int | None
    path: str
    error: str
    since: float
    rounds: int

    @property
    def what(self) -> str:
        """The step, and its run's (trial.run) if it was one run's."""
        run = f" of run {self.trial_id}.{self.run_id}" if self.trial_id is not None else ""
        return f"{self.step}{run}"

    def to_dict(self) -> dict[str, Any]:
        return {"experiment_id": self.experiment_id, "step": self.step,
                "trial_id": self.trial_id, "run_id": self.run_id, "path": self.path,
                "error": self.error, "since": self.since, "rounds": self.rounds}


def daemon_faults(paths: StatePaths, exp_id: int | None = None) -> list[StepFault]:
    """The faults the daemon running for ``paths`` retries now (``exp_id``: that
    experiment's); none when no daemon runs on this host."""
    current = process.info(paths)
    return faults_in(current.status, exp_id) if current.alive else []


def faults_in(status: dict[str, Any], exp_id: int | None = None) -> list[StepFault]:
    """The faults in a daemon's status file (an older daemon's writes none)."""
    found = []
    for f in status.get("faults") or []:
        try:
            fault = StepFault(int(f["experiment_id"]), str(f["step"]),
                              None if f.get("trial_id") is None else int(f["trial_id"]),
                              None if f.get("run_id") is None else int(f["run_id"]),
                              str(f.get("path") or ""), str(f.get("error") or ""),
                              float(f.get("since") or 0.0), int(f.get("rounds") or 0))
        except (KeyError, TypeError, ValueError):
            continue  # a status file of another version's
        if exp_id is None or fault.experiment_id == exp_id:
            found.append(fault)
    return found
