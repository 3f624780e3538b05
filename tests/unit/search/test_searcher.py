"""The Searcher contract: Initialize first, registry, bounds, the stage-3 config, and the
restart property (replaying any prefix of the journal gives the same later decisions)."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from hpcdet.config import load_experiment_config
from hpcdet.config.searcher import SEARCHERS, SearcherConfig
from hpcdet.search import (
    EXIT_COMPLETED,
    SEARCH_METHODS,
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
)
from hpcdet.search.asha import Tournament
from tests.unit.search.fake_cluster import FATES, HARSH_FATES, FakeCluster, assert_restartable

HPARAMS: dict[str, Any] = {
    "lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10, "count": 3},
    "units": {"type": "int", "minval": 1, "maxval": 8, "count": 4},
    "opt": {"name": {"type": "categorical", "vals": ["sgd", "adam"]},
            "momentum": {"type": "double", "minval": 0.5, "maxval": 0.99, "count": 2}},
}


def test_first_event_must_be_initialize() -> None:
    s = Searcher(SearcherConfig(name="single", metric="x"), {}, 0)
    assert s.progress() == 0.0
    with pytest.raises(ValueError, match="first event must be Initialize"):
        s.feed(TrialExited(0, EXIT_COMPLETED))
    s.feed(Initialize())
    with pytest.raises(ValueError, match="Initialize was fed twice"):
        s.feed(Initialize())


def test_events_about_unknown_trials_are_ignored() -> None:
    s = Searcher(SearcherConfig(name="single", metric="x"), {}, 0)
    s.feed(Initialize())
    assert s.feed(TrialExited(5, EXIT_COMPLETED)) == []
    assert s.feed(ValidationReported(-1, {})) == []
    assert s.feed(OpCompleted(3, 1, 1.0)) == []
    assert s.feed(TrialExited(0, EXIT_COMPLETED)) == [Shutdown()]


def test_registry_covers_every_searcher_name() -> None:
    assert set(SEARCH_METHODS) == set(SEARCHERS)
    with pytest.raises(ValueError, match="unknown searcher 'pbt'"):
        Searcher(SearcherConfig(name="pbt", metric="x"), {}, 0)


STAGE_3 = """\
name: core-api-stage-3
entrypoint: python3 3_hpsearch.py
hyperparameters:
  increment_by:
    type: int
    minval: 1
    maxval: 8
searcher:
  name: adaptive_asha
  metric: x
  smaller_is_better: false
  max_length: 100
  max_trials: 10
max_restarts: 0
"""
STAGE_3_V038 = STAGE_3.replace("  max_length: 100\n", "  time_metric: batches\n  max_time: 100\n")


def test_stage_3_brackets_and_rungs() -> None:
    """adaptive_asha, max_length 100, max_trials 10, divisor 4, mode standard: R = min(5,
    int(ln 100/ln 4) + 1 = 4, int(ln 10/ln 4) + 1 = 2) = 2, brackets of 2 and 1 rungs with
    7 and 3 trials, 8 and 8 concurrent (16 split), rungs [25, 100] and [100]."""
    cfg = load_experiment_config(textwrap.dedent(STAGE_3), ())
    s = Searcher(cfg.searcher, cfg.hyperparameters, cfg.experiment_seed)
    actions = s.feed(Initialize())
    trains = [(a.request_id, a.length) for a in actions if isinstance(a, ValidateAfter)]
    assert trains == [(r, 25) for r in range(7)] + [(r, 100) for r in range(7, 10)]
    assert all(1 <= a.hparams["increment_by"] <= 8 for a in actions if isinstance(a, Create))
    assert (s.trial_count_bound(), s.concurrency()) == (10, 10)
    assert isinstance(s._method, Tournament) and len(s._method.brackets) == 2

    cfg = load_experiment_config(textwrap.dedent(STAGE_3_V038), ())
    s = Searcher(cfg.searcher, cfg.hyperparameters, cfg.experiment_seed)
    assert [type(a) for a in s.feed(Initialize())] == [Create] * 10
    # Bracket 1 (2 rungs: 25, 100): the first report at batches >= 25 is alone, so it goes on.
    assert s.feed(ValidationReported(0, {"x": 1.0, "batches": 30})) == []
    assert s.feed(ValidationReported(1, {"x": 2.0, "batches": 30})) == []  # larger is better
    assert s.feed(ValidationReported(2, {"x": 0.5, "batches": 30})) == [Stop(2)]
    # Bracket 2 (1 rung: 100): reaching it stops the trial.
    assert s.feed(ValidationReported(7, {"x": 1.0, "batches": 90})) == []
    assert s.feed(ValidationReported(7, {"x": 1.0, "batches": 100})) == [Stop(7)]


def test_replay_gives_the_same_state() -> None:
    config = SearcherConfig(name="random", metric="loss", max_trials=6, max_concurrent_trials=2)
    s = Searcher(config, HPARAMS, 42)
    events: list[Event] = [
        Initialize(), TrialExited(0, EXIT_COMPLETED), TrialExited(1, EXIT_COMPLETED)]
    decisions = [s.feed(e) for e in events]
    replayed = Searcher.replay(config, HPARAMS, 42, events)
    assert replayed.created() == s.created() == [0, 1, 2, 3]
    assert replayed.progress() == s.progress()
    assert replayed.feed(TrialExited(2, EXIT_COMPLETED)) == s.feed(TrialExited(2, EXIT_COMPLETED))
    assert [type(a) for a in decisions[1]] == [Create]


# ---- the restart property, on long runs driven by a fake cluster -------------------------------

RUNS: dict[str, tuple[dict[str, Any], str]] = {
    "asha-0.37-promotion": ({"name": "adaptive_asha", "max_length": 100, "max_trials": 10,
                             "divisor": 2.0, "mode": "conservative"}, "ops"),
    "asha-0.37-stop-once": ({"name": "adaptive_asha", "max_length": 100, "max_trials": 10,
                             "stop_once": True, "max_concurrent_trials": 3}, "ops"),
    "asha-0.38": ({"name": "adaptive_asha", "time_metric": "batches", "max_time": 100,
                   "max_trials": 10, "divisor": 2.0, "mode": "conservative",
                   "max_concurrent_trials": 4}, "validations"),
    "asha-0.37-large": ({"name": "adaptive_asha", "max_length": 1000, "max_trials": 60,
                         "divisor": 3.0, "max_concurrent_trials": 0}, "ops"),
    "asha-0.38-large": ({"name": "adaptive_asha", "time_metric": "batches", "max_time": 1000,
                         "max_trials": 60, "divisor": 3.0, "max_concurrent_trials": 0},
                        "validations"),
    "random": ({"name": "random", "max_trials": 200, "max_concurrent_trials": 4}, "plain"),
    "random-0.37": ({"name": "random", "max_trials": 12, "max_length": 5,
                     "max_concurrent_trials": 3}, "ops"),
    "grid": ({"name": "grid", "max_concurrent_trials": 5}, "plain"),
    "single": ({"name": "single", "max_length": 1}, "ops"),
}


@pytest.mark.parametrize("cluster_seed", [7, 8])
@pytest.mark.parametrize("name", list(RUNS))
def test_restart_property(name: str, cluster_seed: int) -> None:
    settings, mode = RUNS[name]
    config = SearcherConfig(**{"metric": "loss", **settings})
    fates = HARSH_FATES if name.startswith("asha") else FATES
    length = settings.get("max_time", 100)
    cluster = FakeCluster(Searcher(config, HPARAMS, 1234), seed=cluster_seed, mode=mode,
                          fates=fates, max_time=length, every=length // 10)
    run = cluster.run()
    assert isinstance(run.decisions[-1][-1], Shutdown), "the search must end"
    assert len(run.events) >= 15 or name == "single"
    assert_restartable(config, HPARAMS, 1234, run)
