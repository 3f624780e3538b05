"""The searcher's plan before a create: trials, their longest length, and the lengths summed."""

from __future__ import annotations

import textwrap

from hpcdet.config import ExperimentConfig, load_experiment_config
from hpcdet.search.estimate import Plan, plan


def _config(searcher: str, hparams: str = "{lr: {type: double, minval: 0.01, maxval: 0.1}}"
            ) -> ExperimentConfig:
    return load_experiment_config(textwrap.dedent(f"""\
        entrypoint: python3 train.py
        hyperparameters: {hparams}
        searcher: {searcher}
        """))


def _plan(searcher: str, hparams: str | None = None) -> Plan:
    cfg = _config(searcher) if hparams is None else _config(searcher, hparams)
    return plan(cfg.searcher, cfg.hyperparameters)


def test_single_random_and_grid_run_every_trial_to_its_length() -> None:
    assert _plan("{name: single, metric: loss, max_length: {batches: 100}}") == Plan(
        1, 100, "batches", 100)
    assert _plan("{name: random, metric: loss, max_trials: 5, max_length: {epochs: 3}}") == \
        Plan(5, 3, "epochs", 15)
    grid = "{opt: {type: categorical, vals: [sgd, adam, lamb]}, " \
           "n: {type: int, minval: 1, maxval: 2, count: 2}}"
    assert _plan("{name: grid, metric: loss, max_length: {batches: 10}}", grid) == Plan(
        6, 10, "batches", 60)


def test_asha_runs_one_in_divisor_of_each_rungs_trials_to_the_next() -> None:
    # One bracket, rungs at 100, 300 and 900 batches: 16 trials to 100, 5 on to 300, 1 to 900.
    assert _plan("{name: async_halving, metric: loss, num_rungs: 3, max_trials: 16,"
                 " max_length: {batches: 900}, divisor: 3}") == Plan(
        16, 900, "batches", 16 * 100 + 5 * 200 + 1 * 600)
    # Two brackets (3 and 2 rungs) sharing 16 trials as 12 and 4 (hpcdet.search.brackets):
    # 12 to 62, 3 to 250, 1 to 1000; and 4 to 250, 1 to 1000.
    assert _plan("{name: adaptive_asha, metric: loss, max_trials: 16,"
                 " max_length: {batches: 1000}}") == Plan(
        16, 1000, "batches", (12 * 62 + 3 * 188 + 750) + (4 * 250 + 750))


def test_a_0_38_search_counts_in_its_time_metric() -> None:
    assert _plan("{name: async_halving, metric: loss, num_rungs: 2, max_trials: 4,"
                 " time_metric: batches, max_time: 100, divisor: 4}") == Plan(
        4, 100, "batches", 4 * 25 + 1 * 75)
