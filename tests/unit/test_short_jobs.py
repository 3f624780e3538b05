"""The advice to pack a search whose trials are short jobs: at create from the site's minimum
job length, and from how long its first runs took."""

from __future__ import annotations

from typing import Any

from hpcdet.config import ExperimentConfig
from hpcdet.config.cluster import ClusterConfig
from hpcdet.short_jobs import at_create, from_runs


def config(**changes: Any) -> ExperimentConfig:
    raw: dict[str, Any] = {"name": "x", "entrypoint": "python3 train.py",
                           "searcher": {"name": "random", "metric": "x", "max_trials": 50,
                                        "max_length": 1}}
    raw.update(changes)
    return ExperimentConfig.from_dict(raw)


PACKED = {"slots_per_trial": 1, "packing": {"slots": 4, "walltime": "1:00:00",
                                            "allocations": 2}}


def test_a_site_minimum_gets_the_advice_at_create_unless_the_search_is_packed() -> None:
    site = ClusterConfig(backend="slurm", min_job_minutes=60)
    assert "at least 60 minutes" in at_create(config(), site)
    assert "resources.packing" in at_create(config(), site)
    assert at_create(config(resources=PACKED), site) == ""
    assert at_create(config(), ClusterConfig(backend="slurm")) == ""
    single = config(searcher={"name": "single", "metric": "x", "max_length": 1})
    assert at_create(single, site) == ""


def test_short_first_runs_get_the_advice_with_their_median() -> None:
    said = from_runs([40.0, 35.0, 90.0], config(), None)
    assert "40 s each" in said and "median of 3" in said and "under 2 minutes" in said
    assert "resources.packing" in said


def test_no_advice_before_three_runs_for_long_runs_or_for_a_packed_search() -> None:
    assert from_runs([10.0, 10.0], config(), None) == ""
    assert from_runs([300.0, 10.0, 200.0], config(), None) == ""
    assert from_runs([10.0, 10.0, 10.0], config(resources=PACKED), None) == ""


def test_the_site_minimum_is_the_bar_when_there_is_one() -> None:
    said = from_runs([600.0] * 4, config(), 60)
    assert "under 60 minutes, this site's minimum job length" in said
