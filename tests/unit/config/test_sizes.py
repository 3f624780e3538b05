"""Issue 9 item 9: a config's size, its alias expansion, its search space and its numbers are
bounded, each with a message naming the limit; large grids are planned one point at a time."""

from __future__ import annotations

import os
import re
import time
import tracemalloc
from pathlib import Path

import pytest

from hpcdet.config import load_experiment_config
from hpcdet.config.hyperparameters import MAX_TRIALS
from hpcdet.config.source import MAX_CONFIG_BYTES, MAX_NODES
from hpcdet.errors import ConfigError
from hpcdet.search import Initialize, Searcher, grid_points
from hpcdet.search.space import Grid

HEAD = "name: x\nentrypoint: python3 train.py\nsearcher: {name: single, metric: loss}\n"
LAUGHS = "".join(
    f"  {name}: &{name} [{', '.join([f'*{prev}'] * 9 if prev else ['lol'] * 9)}]\n"
    for prev, name in zip([None, *"abcdefgh"], "abcdefghi")
)


def problems_of(source: str | Path, *overrides: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_experiment_config(source, overrides)
    return info.value.problems


def bounded(source: str | Path, *overrides: str, seconds: float = 5.0) -> list[str]:
    """The problems of loading ``source``, checking it took little time and memory."""
    tracemalloc.start()
    start = time.monotonic()
    try:
        problems = problems_of(source, *overrides)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert time.monotonic() - start < seconds
    assert peak < 50 * 2**20, f"{peak / 2**20:.0f} MiB"
    return problems


def test_billion_laughs_is_refused_before_anything_is_expanded(tmp_path: Path) -> None:
    config = tmp_path / "exp.yaml"
    config.write_text(HEAD + "data:\n" + LAUGHS)
    assert config.stat().st_size < 600
    [problem] = bounded(config)
    assert re.match(
        rf"<top level> \(line \d+\): the YAML expands to more than {MAX_NODES} values through"
        r" aliases \(\*name\), far more than a config holds; write the values out without aliases",
        problem,
    ), problem


def test_merge_key_doubling_is_refused() -> None:
    levels = ["  m0: &m0 {a: 1, b: 2}\n"] + [
        f"  m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}], c{i}: 1}}\n" for i in range(1, 40)
    ]
    [problem] = bounded(HEAD + "data:\n" + "".join(levels))
    assert "the YAML expands to more than" in problem


def test_alias_bomb_in_an_override_is_refused() -> None:
    laughs = "{" + LAUGHS.replace("\n", ",").replace("  ", "") + "}"
    [problem] = bounded(HEAD, f"data={laughs}")
    assert problem.startswith("--config 'data={a: &a [")
    assert "the YAML expands to more than" in problem


def test_aliases_within_the_budget_still_load() -> None:
    cfg = load_experiment_config(HEAD + "data:\n  a: &a [1, 2]\n  b: [*a, *a]\n  c: {<<: {x: 1}}\n")
    assert cfg.data == {"a": [1, 2], "b": [[1, 2], [1, 2]], "c": {"x": 1}}


def test_a_config_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    config = tmp_path / "exp.yaml"
    with config.open("w") as file:
        file.write(HEAD + "data:\n")
        file.truncate(37 * 2**20)  # 37 MiB, mostly NUL bytes: never parsed
    [problem] = bounded(config, seconds=1.0)
    assert problem == (
        f"{config}: is 37.0 MiB (38797312 bytes), more than the 1 MiB a config may be; put large"
        " data in a file in the context directory and read it from the trial"
    )
    assert MAX_CONFIG_BYTES == 2**20


def test_a_config_file_of_the_limit_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hpcdet.config.source.MAX_CONFIG_BYTES", 4096)
    config = tmp_path / "exp.yaml"
    config.write_text(HEAD + "#" * (4096 - len(HEAD)))
    assert load_experiment_config(config).name == "x"
    config.write_text(HEAD + "#" * (4097 - len(HEAD)))
    assert "is 0.0 MiB (4097 bytes), more than the 4096 bytes a config may be" in problems_of(
        config
    )[0]


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "exp.yaml"
    os.mkfifo(fifo)
    assert problems_of(fifo) == [f"{fifo}: is not a regular file; pass the path of a YAML config"]


def test_many_plain_values_stop_at_the_node_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hpcdet.config.source.MAX_NODES", 500)
    text = HEAD + "data: [" + "1, " * 510 + "]\n"
    [problem] = bounded(text)
    assert problem.startswith("<top level> (line 4): the YAML expands to more than 500 values,"
                              " far more than a config holds; put large data in a file")


@pytest.mark.parametrize(("field", "value"), [
    ("max_trials", "100000000000000000000000"),
    ("max_trials", "1e23"),
    ("max_concurrent_trials", "1000000"),
])
def test_trial_counts_are_bounded(field: str, value: str) -> None:
    problems = problems_of(
        f"entrypoint: x\nsearcher: {{name: random, metric: m, max_trials: 5, {field}: {value}}}\n"
        .replace("max_trials: 5, max_trials", "max_trials")
    )
    assert problems[0].startswith(f"searcher.{field} (line 2): must be an integer between")


@pytest.mark.parametrize(("field", "value"), [
    ("max_restarts", "9223372036854775808"),
    ("records_per_epoch", "-99999999999999999999999999999999999999999"),
    ("scheduling_unit", "123456789012345678901234567890123456789012345678901234567890"),
    ("reproducibility", "{experiment_seed: 18446744073709551616}"),
    ("searcher", "{name: single, metric: m, source_trial_id: 9223372036854775808}"),
])
def test_every_integer_fits_sqlite(field: str, value: str) -> None:
    text = f"entrypoint: x\nsearcher: {{name: single, metric: m}}\n{field}: {value}\n"
    if field == "searcher":
        text = f"entrypoint: x\n{field}: {value}\n"
    problems = problems_of(text)
    assert len(problems) == 1 and "between -9223372036854775808 and 9223372036854775807" in \
        problems[0] or "must be an integer >= " in problems[0], problems
    assert len(problems[0]) < 300


def test_a_grid_of_the_largest_size_is_planned_one_point_at_a_time() -> None:
    cfg = load_experiment_config(
        "entrypoint: x\nsearcher: {name: grid, metric: m, max_concurrent_trials: 4}\n"
        "hyperparameters:\n  a: {type: double, minval: 0, maxval: 1, count: 1000}\n"
        "  b: {type: categorical, vals: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}\n"
        "  c: {type: int, minval: 0, maxval: 9, count: 10}\n"
    )
    tracemalloc.start()
    searcher = Searcher(cfg.searcher, cfg.hyperparameters, 0)
    actions = searcher.feed(Initialize())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert searcher.trial_count_bound() == MAX_TRIALS
    assert [a.hparams for a in actions] == [  # type: ignore[attr-defined]
        {"a": 1.0, "b": 10, "c": 9}, {"a": 1.0, "b": 10, "c": 8},
        {"a": 1.0, "b": 10, "c": 7}, {"a": 1.0, "b": 10, "c": 6},
    ]
    assert peak < 2 * 2**20, f"{peak / 2**20:.1f} MiB"


def test_grid_points_in_product_order() -> None:
    space = {"x": {"type": "categorical", "vals": [1, 2]},
             "g": {"y": {"type": "int", "minval": 0, "maxval": 2, "count": 3}, "e": {}}}
    points = grid_points(space)
    assert points == [{"g": {"e": {}, "y": y}, "x": x} for y in (0, 1, 2) for x in (1, 2)]
    grid = Grid(space)
    assert len(grid) == 6 and grid.point(5) == points[5]
    with pytest.raises(IndexError):
        grid.point(6)
