"""Experiments as `experiment list` and `experiment describe` show them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hpcdet.store.models import ArrayJob, Experiment, Run, Trial
from hpcdet.store.repository import Store


@dataclass(frozen=True)
class BestTrial:
    trial_id: int
    metric: str
    value: float


@dataclass(frozen=True)
class ExperimentRow:
    experiment: Experiment
    progress: float  # 0..1: the searcher's, or else the share of its trials' work done
    best: BestTrial | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stable form of ``experiment list --json``."""
        e = self.experiment
        return {"id": e.id, "name": e.name, "state": e.state, "progress": self.progress,
                "description": e.description, "labels": json.loads(e.labels_json),
                "archived": e.archived, "searcher": e.searcher, "backend": e.backend,
                "resource_pool": e.resource_pool, "priority": e.priority, "weight": e.weight,
                "started": e.created, "ended": e.ended, "error": e.error}


@dataclass(frozen=True)
class TrialRow:
    trial: Trial
    searcher: str  # what the searcher decided for it (searcher_summary)


@dataclass(frozen=True)
class ExperimentView:
    experiment: Experiment
    config: dict[str, Any]
    trials: list[TrialRow]
    runs: list[Run]
    arrays: list[ArrayJob]
    best: BestTrial | None

    @property
    def searcher(self) -> dict[str, Any]:
        searcher: dict[str, Any] = self.config.get("searcher", {})
        return searcher


def experiment_rows(store: Store, with_best: bool = False) -> list[ExperimentRow]:
    """Every experiment with its progress; ``with_best``, also its best trial (which needs
    each config and every trial)."""
    work = store.trial_work()
    by_exp: dict[int, list[Trial]] = {}
    for t in store.trials() if with_best else []:
        by_exp.setdefault(t.experiment_id, []).append(t)
    rows = []
    for exp in store.experiments(config=with_best):
        count, done = work.get(exp.id, (0, 0.0))
        best = None
        if with_best:
            searcher = json.loads(exp.config_json).get("searcher", {})
            best = best_trial(by_exp.get(exp.id, []), searcher.get("metric", ""),
                              searcher.get("smaller_is_better", True))
        rows.append(ExperimentRow(exp, exp.progress or done / max(1, count), best))
    return rows


def describe_experiment(store: Store, exp_id: int) -> ExperimentView:
    exp = store.experiment(exp_id)
    trials = store.trials(exp_id)
    config = json.loads(exp.config_json)
    searcher = config.get("searcher", {})
    return ExperimentView(
        experiment=exp, config=config,
        trials=[TrialRow(t, searcher_summary(t)) for t in trials],
        runs=store.runs([t.id for t in trials]), arrays=store.arrays(exp_id),
        best=best_trial(trials, searcher.get("metric", ""),
                        searcher.get("smaller_is_better", True)),
    )


def best_trial(trials: list[Trial], metric: str, smaller_is_better: bool) -> BestTrial | None:
    """The trial with the best validation of the searcher metric so far (the first on a tie)."""
    scored = [t for t in trials if t.best_validation is not None]
    if not scored:
        return None
    best = (min if smaller_is_better else max)(scored, key=lambda t: t.best_validation or 0.0)
    assert best.best_validation is not None
    return BestTrial(best.id, metric, best.best_validation)


def searcher_summary(t: Trial) -> str:
    """What the searcher decided for the trial: operations (promotions), close, stop."""
    ops = json.loads(t.ops_json)
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


def describe_sheets(store: Store, exp_ids: list[int], metrics: bool) -> list[Sheet]:
    """Determined's three describe tables over several experiments: the experiments, their
    trials, and their workloads (every metric report and checkpoint, by trial and step; with
    ``metrics``, a column per metric)."""
    exps = [store.experiment(i) for i in exp_ids]
    trials = [t for i in exp_ids for t in store.trials(i)]
    experiments = Sheet("experiments", [
        "Experiment ID", "State", "Progress", "Started", "Ended", "Name", "Description",
        "Archived", "Resource Pool", "Labels"], [
        [e.id, e.state, e.progress, e.created, e.ended, e.name, e.description, e.archived,
         e.resource_pool, ", ".join(sorted(json.loads(e.labels_json)))] for e in exps])
    trial_sheet = Sheet("trials", [
        "Trial ID", "Experiment ID", "State", "Started", "Ended", "H-Params"], [
        [t.id, t.experiment_id, t.state, t.started, t.ended, t.hparams_json] for t in trials])
    reports = [(t.id, m) for t in trials for m in store.metrics(t.id)]
    names: list[str] = []
    for _, m in reports if metrics else []:
        names += [k for k in json.loads(m.metrics_json) if k not in names]
    rows: list[list[Any]] = []
    for trial_id, m in reports:
        values = json.loads(m.metrics_json)
        rows.append([trial_id, m.steps_completed, m.group, m.reported, "",
                     *[values.get(k, "") for k in names]])
    rows += [[c.trial_id, c.steps_completed, "checkpoint", c.reported, c.uuid,
              *[""] * len(names)] for i in exp_ids for c in store.checkpoints(exp_id=i)]
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    workloads = Sheet("workloads", [
        "Trial ID", "# of Batches", "Kind", "Report Time", "Checkpoint UUID",
        *[f"Metric: {k}" for k in names]], rows)
    return [experiments, trial_sheet, workloads]
