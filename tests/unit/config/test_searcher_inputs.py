"""Issue 9 item 5: every searcher input that could fail once the experiment runs is refused at
validation, with the YAML path; every config that validates builds its searcher and first plan."""

from __future__ import annotations

import textwrap

import pytest

from hpcdet.config import ExperimentConfig, load_experiment_config
from hpcdet.errors import ConfigError
from hpcdet.search import Initialize, Searcher


def load(text: str) -> ExperimentConfig:
    return load_experiment_config(textwrap.dedent(text))


def first_problem(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load(text)
    return info.value.problems[0]


def only_problem(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load(text)
    assert len(info.value.problems) == 1, info.value.problems
    return info.value.problems[0]


def first_plan(cfg: ExperimentConfig) -> None:
    """What the daemon does with a new experiment: build the searcher, take its first plan."""
    searcher = Searcher(cfg.searcher, cfg.hyperparameters, cfg.experiment_seed)
    actions = searcher.feed(Initialize())
    assert actions
    searcher.trial_count_bound()
    searcher.concurrency()
    searcher.progress()
    # A stored config is revalidated when the daemon restarts.
    again = ExperimentConfig.from_dict(cfg.to_dict())
    Searcher(again.searcher, again.hyperparameters, again.experiment_seed).feed(Initialize())


ASHA = "entrypoint: x\nsearcher: {{name: adaptive_asha, metric: m, {}}}\n"
HP = (
    "entrypoint: x\nsearcher: {{name: random, metric: m, max_trials: 4}}\nhyperparameters:\n"
    "  h: {}\n"
)


@pytest.mark.parametrize(("fields", "start"), [
    ("max_length: 0", "searcher.max_length (line 2): must be at least 1 for the adaptive_asha"),
    ("max_length: -3", "searcher.max_length (line 2): must be an integer >= 0"),
    ("max_length: {batches: 0}", "searcher.max_length.batches (line 2): must be an integer >= 1"),
    ("time_metric: b, max_time: 0", "searcher.max_time (line 2): must be an integer"),
    ("max_length: 10, max_rungs: 0", "searcher.max_rungs (line 2): must be an integer between 1"),
    ("max_length: 10, max_rungs: 100000", "searcher.max_rungs (line 2): must be an integer"
     " between 1 and 32"),
    ("max_length: 10, divisor: 1", "searcher.divisor (line 2): must be a number > 1"),
    ("max_length: 10, divisor: 1e308", "searcher.divisor (line 2): must be a number > 1 and"
     " <= 1e+06"),
    ("max_length: 10, bracket_rungs: [1000000000]", "searcher.bracket_rungs (line 2): must be a"
     " list of at most 32 integers between 1 and 32"),
    ("max_length: 99999999999999999999999", "searcher.max_length (line 2): is too large"),
    ("max_length: 10, max_trials: 1000000", "searcher.max_trials (line 2): must be an integer"
     " between 1 and 100000"),
])
def test_asha_inputs_that_fail_later_are_refused(fields: str, start: str) -> None:
    if "max_trials" not in fields:
        fields = "max_trials: 16, " + fields
    problem = first_problem(ASHA.format(fields))
    assert problem.startswith(start), problem


@pytest.mark.parametrize(("hp", "start"), [
    ("{type: log, minval: 0, maxval: 2000, base: 10}",
     "hyperparameters.h.maxval (line 4): 10 ** 2000 is too large"),
    ("{type: log, minval: -400, maxval: 1, base: 0.1}",
     "hyperparameters.h.minval (line 4): 0.1 ** -400 is too large"),
    ("{type: log, minval: 1, maxval: 2, base: .inf}", "hyperparameters.h.base (line 4): must be"
     " a finite number of magnitude at most 1e+300, got inf"),
    ("{type: double, minval: .nan, maxval: 1}", "hyperparameters.h.minval (line 4): must be a"
     " finite number of magnitude at most 1e+300, got nan"),
    ("{type: double, minval: -.inf, maxval: 1}", "hyperparameters.h.minval (line 4): must be a"
     " finite number of magnitude at most 1e+300, got -inf"),
    ("{type: double, minval: -1e308, maxval: 1}", "hyperparameters.h.minval (line 4): must"
     " be a finite number of magnitude at most 1e+300"),
    ("{type: const, val: [.inf]}", "hyperparameters.h.val[0] (line 4): inf is not a number a"
     " config can hold"),
    (".nan", "hyperparameters.h (line 4): nan is not a number"),
    ("{type: int, minval: 0, maxval: 100000000000000000000}",
     "hyperparameters.h.maxval (line 4): is too large: integers must be between"),
    ("{type: categorical, vals: [1, .nan]}", "hyperparameters.h.vals[1] (line 4): nan is not"),
])
def test_hyperparameters_that_fail_at_create_are_refused(hp: str, start: str) -> None:
    problem = only_problem(HP.format(hp))
    assert problem.startswith(start), problem


def test_non_finite_numbers_are_refused_anywhere_in_the_config() -> None:
    problem = only_problem("entrypoint: x\nsearcher: {name: single, metric: m}\ndata: {a: .inf}\n")
    assert problem.startswith("data.a (line 3): inf is not a number a config can hold")
    assert "quote it ('inf')" in problem


ACCEPTED = [
    ASHA.format("max_trials: 1, max_length: 1"),
    ASHA.format("max_trials: 9, max_length: {epochs: 1}, divisor: 1.0000001, max_rungs: 32,"
                " mode: conservative"),
    ASHA.format("max_trials: 9, max_length: 9223372036854775807, divisor: 1000000,"
                " bracket_rungs: [32, 1]"),
    ASHA.format("max_trials: 7, time_metric: b, max_time: 1, max_concurrent_trials: 0,"
                " mode: aggressive"),
    ASHA.format("max_length: 100, max_trials: 100000, max_concurrent_trials: 0, stop_once: true"),
    HP.format("{type: log, minval: -300, maxval: 300, base: 10}"),
    HP.format("{type: log, minval: -1e300, maxval: 1e300, base: 1}"),
    HP.format("{type: double, minval: -1e300, maxval: 1e300}"),
    HP.format("{type: int, minval: -9223372036854775808, maxval: 9223372036854775807}"),
    "entrypoint: x\nsearcher: {name: grid, metric: m, max_concurrent_trials: 2}\n"
    "hyperparameters: {a: {type: int, minval: 1, maxval: 100000, count: 100000}}\n",
    "entrypoint: x\nsearcher: {name: grid, metric: m, max_length: 0}\n"
    "hyperparameters: {a: {type: log, minval: -300, maxval: 300, base: 10, count: 3}, b: {}}\n",
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_every_accepted_config_builds_its_searcher_and_first_plan(text: str) -> None:
    first_plan(load(text))


def test_grid_larger_than_the_trial_limit_is_refused_before_any_point_is_made() -> None:
    problem = only_problem(
        "entrypoint: x\nsearcher: {name: grid, metric: m}\nhyperparameters:\n"
        "  a: {type: double, minval: 0, maxval: 1, count: 1000}\n"
        "  b: {type: categorical, vals: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}\n"
        "  c: {type: int, minval: 0, maxval: 9, count: 100000}\n"
    )
    assert problem.startswith("hyperparameters (line 3): the grid has more than 100000 points")


def test_grid_count_above_the_trial_limit_is_refused() -> None:
    problem = first_problem(
        "entrypoint: x\nsearcher: {name: grid, metric: m}\n"
        "hyperparameters: {a: {type: int, minval: 1, maxval: 3, count: 1000000}}\n"
    )
    assert problem.startswith("hyperparameters.a.count (line 3): must be an integer between 1"
                              " and 100000 (grid points)")


def test_an_int_range_smaller_than_its_count_makes_a_small_grid() -> None:
    cfg = load("entrypoint: x\nsearcher: {name: grid, metric: m}\nhyperparameters:\n"
               "  a: {type: int, minval: 1, maxval: 3, count: 100000}\n"
               "  b: {type: categorical, vals: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}\n")
    assert Searcher(cfg.searcher, cfg.hyperparameters, 0).trial_count_bound() == 30


def test_walltime_beyond_a_year_is_refused() -> None:
    problem = only_problem(
        "entrypoint: x\nsearcher: {name: single, metric: m}\nslurm: {walltime: 99999999999}\n"
    )
    assert problem.startswith("slurm.walltime (line 3): must be a walltime of at most 365 days")
