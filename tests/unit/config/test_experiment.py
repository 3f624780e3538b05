from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hpcdet.config import ExperimentConfig, load_experiment_config, parse_walltime
from hpcdet.errors import ConfigError

STAGE_0 = """\
name: core-api-stage-0
entrypoint: python3 0_start.py
searcher:
  name: single
  metric: x
  max_length: 1
max_restarts: 0
"""

SINGLE = "entrypoint: x\nsearcher: {name: single, metric: m}\n"
MINIMAL = "entrypoint: python3 train.py\nsearcher: {name: single, metric: loss}\n"


def load(text: str, *overrides: str) -> ExperimentConfig:
    return load_experiment_config(textwrap.dedent(text), overrides)


def problems_of(text: str, *overrides: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(text, *overrides)
    return info.value.problems


def only_problem(text: str, *overrides: str) -> str:
    problems = problems_of(text, *overrides)
    assert len(problems) == 1, problems
    return problems[0]


# --------------------------------------------------------------------------- tutorial configs


def test_core_api_stage_0_loads() -> None:
    config = load(STAGE_0)
    assert config.name == "core-api-stage-0"
    assert config.entrypoint == "python3 0_start.py"
    assert config.max_restarts == 0
    assert config.searcher.name == "single"
    assert config.searcher.metric == "x"
    assert config.searcher.max_length == 1
    assert config.searcher.max_length_unit is None
    assert config.searcher.max_trials == 1
    assert config.searcher.max_concurrent_trials == 1


def test_038_tutorials_without_max_length_load() -> None:
    config = load("name: s\nentrypoint: python3 1_metrics.py\nsearcher: {name: single, metric: x}")
    assert config.searcher.max_length is None


def test_hpsearch_tutorials_both_generations_load() -> None:
    common = """\
    name: core-api-stage-3
    entrypoint: python3 3_hpsearch.py
    hyperparameters:
      increment_by:
        type: int
        minval: 1
        maxval: 8
    """
    old = load(common + "searcher: {name: adaptive_asha, metric: x, max_trials: 10, "
               "max_length: 100}\n")
    new = load(common + "searcher: {name: adaptive_asha, metric: x, max_trials: 10, "
               "time_metric: batches, max_time: 100}\n")
    assert old.searcher.max_length == 100 and old.searcher.max_time is None
    assert new.searcher.time_metric == "batches" and new.searcher.max_time == 100
    assert new.hyperparameters == {
        "increment_by": {"type": "int", "minval": 1, "maxval": 8, "count": None}
    }


def test_distributed_and_mnist_tutorials_load() -> None:
    distributed = load("""\
    name: core-api-stage-4
    entrypoint: python3 4_distributed.py launcher
    resources:
      slots_per_trial: 8
    searcher:
      name: single
      metric: x
      max_length: 100
    max_restarts: 0
    """)
    assert distributed.resources.slots_per_trial == 8
    mnist = load("""\
    name: mnist_pytorch_adaptive_search
    hyperparameters:
      learning_rate: {type: double, minval: .0001, maxval: 1.0}
      n_filters1: {type: int, minval: 8, maxval: 64}
      dropout1: {type: double, minval: .2, maxval: .8}
    searcher:
      name: adaptive_asha
      metric: test_loss
      smaller_is_better: true
      max_trials: 500
      max_length:
        epochs: 20
    entrypoint: >-
      python3 -m determined.launch.torch_distributed
      python3 model_def_distributed.py
    """)
    assert mnist.searcher.max_length == 20 and mnist.searcher.max_length_unit == "epochs"
    assert mnist.entrypoint == (
        "python3 -m determined.launch.torch_distributed python3 model_def_distributed.py"
    )
    assert mnist.hyperparameters["learning_rate"]["minval"] == 0.0001


def test_loads_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "0_start.yaml"
    path.write_text(STAGE_0)
    assert load_experiment_config(path).name == "core-api-stage-0"
    assert load_experiment_config(str(path)).name == "core-api-stage-0"


# ----------------------------------------------------------------------------------- defaults


def test_defaults_are_determined_s() -> None:
    config = load(MINIMAL)
    raw = config.raw
    assert config.name.startswith("Experiment (") and config.name.endswith(")")
    assert len(config.name[len("Experiment ("):-1].split("-")) == 3
    assert config.max_restarts == 5
    assert config.resources.slots_per_trial == 1
    assert config.resources.priority is None
    assert config.resources.weight == 1
    assert config.resources.resource_pool == ""
    assert config.preemption_timeout == 3600
    assert config.checkpoint_storage is None
    assert config.searcher.smaller_is_better is True
    assert isinstance(config.experiment_seed, int) and config.experiment_seed >= 0
    assert raw["min_validation_period"] == {"batches": 0}
    assert raw["min_checkpoint_period"] == {"batches": 0}
    assert raw["records_per_epoch"] == 0
    assert raw["scheduling_unit"] == 100
    assert raw["checkpoint_policy"] == "best"
    assert raw["perform_initial_validation"] is False
    assert raw["debug"] is False
    assert raw["labels"] == [] and raw["data"] == {} and raw["bind_mounts"] == []
    assert raw["description"] is None
    assert raw["reproducibility"]["experiment_seed"] == config.experiment_seed


def test_asha_defaults() -> None:
    config = load("""\
    entrypoint: python3 train.py
    searcher: {name: adaptive_asha, metric: loss, max_trials: 16, max_length: 100}
    """)
    searcher = config.searcher
    assert searcher.max_concurrent_trials == 16
    assert searcher.mode == "standard"
    assert searcher.divisor == 4.0
    assert searcher.max_rungs == 5
    assert searcher.bracket_rungs == []
    assert searcher.stop_once is False
    assert config.raw["searcher"]["max_concurrent_trials"] == 16


def test_default_name_is_stable_and_explicit_name_kept() -> None:
    assert load(MINIMAL).name == load(MINIMAL).name
    assert load(MINIMAL + "name: mine\n").name == "mine"


def test_null_means_default() -> None:
    config = load(MINIMAL + "max_restarts: null\nresources: {slots_per_trial: null}\n"
                  "preemption_timeout: null\n")
    assert config.max_restarts == 5
    assert config.resources.slots_per_trial == 1
    assert config.preemption_timeout == 3600


def test_checkpoint_storage_defaults_and_root() -> None:
    config = load(MINIMAL + "checkpoint_storage: {type: shared_fs, host_path: /scratch/me,"
                  " storage_path: ckpts}\n")
    storage = config.checkpoint_storage
    assert storage is not None
    assert (storage.save_experiment_best, storage.save_trial_best, storage.save_trial_latest) == (
        0, 1, 1,
    )
    assert storage.propagation == "rprivate"
    assert storage.root == "/scratch/me/ckpts"
    directory = load(MINIMAL + "checkpoint_storage: {type: directory, container_path: /ck}\n")
    assert directory.checkpoint_storage is not None
    assert directory.checkpoint_storage.root == "/ck"


def test_checkpoint_storage_of_gc_settings_alone_keeps_the_default_storage(
    tmp_path: Path,
) -> None:
    # As Determined's official examples write it (mnist_pytorch's const.yaml and others).
    config = load(MINIMAL + "checkpoint_storage: {save_trial_best: 3, save_trial_latest: 0}\n")
    storage = config.checkpoint_storage
    assert storage is not None and storage.is_default
    assert (storage.save_experiment_best, storage.save_trial_best, storage.save_trial_latest) == (
        0, 3, 0)
    assert config.checkpoint_dir(tmp_path) == tmp_path


def test_storage_path_inside_host_path_is_accepted() -> None:
    config = load(MINIMAL + "checkpoint_storage: {type: shared_fs, host_path: /a,"
                  " storage_path: /a/b}\n")
    assert config.checkpoint_storage is not None
    assert config.checkpoint_storage.root == "/a/b"


# ------------------------------------------------------------------------- collected problems


def test_several_mistakes_are_all_reported_with_paths_and_lines() -> None:
    text = """\
    entrypoint: python3 train.py
    max_restarts: -1
    hyperparameters:
      lr: {type: double, minval: 0.1, maxval: 0.01}
    searcher:
      name: random
      metric: loss
      max_trials: 0
    resources:
      slots_per_trial: two
    bind_mounts:
      - host_path: /data
        container_path: /data
      - host_path: data
        container_path: /d2
    """
    problems = problems_of(text)
    assert len(problems) == 5, problems
    joined = "\n".join(problems)
    assert "max_restarts (line 2): must be an integer >= 0, got -1 (an integer)" in joined
    assert "hyperparameters.lr.minval (line 4): minval (0.1) must be less than maxval (0.01)" in (
        joined
    )
    assert "searcher.max_trials (line 8): must be an integer between 1 and 100000, got 0" in joined
    assert "resources.slots_per_trial (line 10): must be an integer >= 0, got 'two' (a string)" in (
        joined
    )
    assert "bind_mounts[1].host_path (line 14): host_path must be an absolute path" in joined
    with pytest.raises(ConfigError) as info:
        load(text)
    assert str(info.value).startswith("invalid experiment config (5 problem(s)):\n  - ")


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text("entrypoint: x\n")
    with pytest.raises(ConfigError) as info:
        load_experiment_config(path)
    assert info.value.source == f"experiment config {path}"
    assert info.value.problems == [
        "searcher: is required; e.g. searcher: {name: single, metric: validation_loss}"
    ]
    with pytest.raises(ConfigError, match="no such file"):
        load_experiment_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="is a directory"):
        load_experiment_config(tmp_path)


def test_missing_entrypoint_and_metric() -> None:
    problems = problems_of("searcher: {name: single}\n")
    assert problems == [
        "entrypoint: managed experiments require entrypoint; e.g. entrypoint: python3 train.py",
        "searcher.metric (line 1): is required: the name of the validation metric to optimise,"
        " e.g. metric: validation_loss",
    ]


def test_yaml_syntax_error_names_the_line() -> None:
    problem = only_problem("entrypoint: x\nsearcher:\n  name: single\n metric: [x\n")
    assert problem.startswith("<top level> (line 4, column 2): invalid YAML")


def test_duplicate_keys_are_reported() -> None:
    problem = only_problem(MINIMAL + "max_restarts: 1\nmax_restarts: 2\n")
    assert problem.startswith("max_restarts (line 4): duplicate key, also set on line 3")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        "42",
        "just a string",
        "a: !!binary aGVsbG8=\n",
        "? [a, b]\n: c\n",
        "a: &x [*x]\n",
        "1: x\n",
        "entrypoint: {a: 1}\nsearcher: [1]\n",
        "entrypoint: x\nsearcher: {name: [1], metric: 3}\n",
        "entrypoint: x\nsearcher: {name: grid, metric: m}\nhyperparameters: {a: {type: [1]}}\n",
        SINGLE + "hyperparameters: [1]\n",
        SINGLE + "resources: 3\nslurm: [a]\n",
        SINGLE + "environment:\n  image: [1]\n"
        "  environment_variables: {gpu: 1}\n  ports: {a: b}\n",
        SINGLE + "bind_mounts: [1, {}]\n",
        SINGLE + "checkpoint_storage: {type: [1]}\n",
        SINGLE + "slurm: {sbatch_args: [1, '', \"'\"]}\n",
        "entrypoint: x\nsearcher: {name: adaptive_asha, metric: m, bracket_rungs: x}\n",
        "entrypoint: x\nsearcher: {name: random, metric: m, max_length: {batches: x, epochs: 1}}",
        SINGLE + "min_validation_period: 3\n",
        "\t- bad\n",
    ],
)
def test_bad_input_only_ever_raises_config_error(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_experiment_config(text + "\n", ["x.y.z=1", "=", "entrypoint.a=1"])
    assert info.value.problems
    assert all(isinstance(p, str) and p for p in info.value.problems)


def test_dates_and_numbers_read_as_in_yaml_1_2() -> None:
    config = load(MINIMAL + "data: {day: 2024-01-02, lr: 1e-5, t: 1:30:00}\n")
    assert config.data == {"day": "2024-01-02", "lr": 1e-5, "t": "1:30:00"}


# ------------------------------------------------------------------------------ did you mean


def test_unknown_keys_suggest_close_names() -> None:
    problems = problems_of(MINIMAL + "hyperparameter: {}\nresources: {slot_per_trial: 2}\n")
    assert problems == [
        "hyperparameter (line 3): unknown key; did you mean 'hyperparameters'?",
        "resources.slot_per_trial (line 4): unknown key; did you mean 'slots_per_trial'?",
    ]


def test_unknown_key_far_from_anything_lists_valid_keys() -> None:
    problem = only_problem(MINIMAL + "reproducibility: {zzz: 1}\n")
    assert problem == "reproducibility.zzz (line 3): unknown key; valid keys: experiment_seed"


def test_resources_slots_is_refused_with_a_hint() -> None:
    problem = only_problem(MINIMAL + "resources:\n  slots: 4\n")
    assert problem == (
        'resources.slots (line 4): additionalProperties "slots" not allowed; use'
        " resources.slots_per_trial (the number of GPUs, or CPU slots, each trial gets)"
    )


def test_searcher_name_suggestion_and_removed_searchers() -> None:
    problem = only_problem("entrypoint: x\nsearcher: {name: randm, metric: m, max_trials: 2}\n")
    assert "searcher.name (line 2): must be one of single, random, grid, adaptive_asha" in problem
    assert problem.endswith("did you mean 'random'?")
    custom = only_problem("entrypoint: x\nsearcher: {name: custom, metric: m}\n")
    assert custom == (
        "searcher.name (line 2): the 'custom' searcher has been removed and is not valid for new"
        " experiments"
    )


# ---------------------------------------------------------------------------------- overrides


def test_overrides_set_values_and_create_sections() -> None:
    config = load(
        STAGE_0,
        "resources.slots_per_trial=2",
        "searcher.max_length=5",
        "name=foo",
        "slurm.partition=gpu",
        "labels=[a, b]",
    )
    assert config.resources.slots_per_trial == 2
    assert config.searcher.max_length == 5
    assert config.name == "foo"
    assert config.slurm.partition == "gpu"
    assert config.labels == ["a", "b"]


def test_override_problems_name_the_override() -> None:
    problems = problems_of(
        STAGE_0, "searcher.max_length=lots", "justakey", "entrypoint.x=1", "labels=[a,"
    )
    assert problems == [
        "--config 'justakey': expected KEY=VALUE with a dotted key, e.g. --config"
        " resources.slots_per_trial=2",
        "--config 'entrypoint.x=1': entrypoint is not a mapping, so entrypoint.x cannot be set",
        "labels (--config 'labels=[a,'): the value is not valid YAML; if it is a string, quote"
        " it: --config 'labels=\"[a,\"'",
        "searcher.max_length (--config searcher.max_length=lots): must be an integer >= 0 or one"
        " of {batches|records|epochs: N}; e.g. max_length: 100 or max_length: {epochs: 20},"
        " got 'lots' (a string)",
    ]


def test_override_into_a_list_item() -> None:
    config = load(MINIMAL + "bind_mounts:\n  - {host_path: /a, container_path: /b}\n",
                  "bind_mounts.0.read_only=true")
    assert config.bind_mounts[0].read_only is True


# ---------------------------------------------------------------------------- hyperparameters


def test_hyperparameter_types_are_normalised() -> None:
    config = load(MINIMAL + textwrap.dedent("""\
    hyperparameters:
      global_batch_size: 32
      opt: {type: const, val: adam}
      layers: {type: int, minval: 1, maxval: 4, count: 4}
      dropout: {type: double, minval: 0.1, maxval: 0.5}
      lr: {type: log, minval: -4, maxval: -1, base: 10}
      act: {type: categorical, vals: [relu, tanh]}
      model:
        width: 128
        depth: {type: int, minval: 2, maxval: 8}
      listy: [1, 2]
    """))
    assert config.hyperparameters == {
        "global_batch_size": {"type": "const", "val": 32},
        "opt": {"type": "const", "val": "adam"},
        "layers": {"type": "int", "minval": 1, "maxval": 4, "count": 4},
        "dropout": {"type": "double", "minval": 0.1, "maxval": 0.5, "count": None},
        "lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10, "count": None},
        "act": {"type": "categorical", "vals": ["relu", "tanh"]},
        "model": {
            "width": {"type": "const", "val": 128},
            "depth": {"type": "int", "minval": 2, "maxval": 8, "count": None},
        },
        "listy": {"type": "const", "val": [1, 2]},
    }


@pytest.mark.parametrize(
    ("hp", "expected"),
    [
        ("{type: int, minval: 1.5, maxval: 4}",
         "hyperparameters.h.minval (line 4): must be an integer, got 1.5 (a number)"),
        ("{type: int, minval: 4, maxval: 4}",
         "hyperparameters.h.minval (line 4): minval (4) must be less than maxval (4)"),
        ("{type: double, minval: 0, maxval: x}",
         "hyperparameters.h.maxval (line 4): must be a number, got 'x' (a string)"),
        ("{type: log, minval: -3, maxval: -1, base: 0}",
         "hyperparameters.h.base (line 4): must be a number > 0, got 0 (an integer)"),
        ("{type: log, minval: -3, maxval: -1}",
         "hyperparameters.h.base (line 4): is required for a log hyperparameter, e.g. base: 10"),
        ("{type: categorical, vals: []}",
         "hyperparameters.h.vals (line 4): must be a non-empty list of choices, got an empty"
         " list"),
        ("{type: const}",
         "hyperparameters.h.val (line 4): a const hyperparameter needs val"),
        ("{type: int, minval: 1, maxval: 3, count: 0}",
         "hyperparameters.h.count (line 4): must be an integer between 1 and 100000"),
        ("{type: int, minval: 1, maxval: 3, step: 1}",
         "hyperparameters.h.step (line 4): unknown key for a int hyperparameter"),
        ("{type: float, minval: 1, maxval: 3}",
         "hyperparameters.h.type (line 4): must be one of const, int, double, log, categorical,"
         " got 'float' (a string)"),
    ],
)
def test_hyperparameter_mistakes(hp: str, expected: str) -> None:
    problem = only_problem(MINIMAL + f"hyperparameters:\n  h: {hp}\n")
    assert problem.startswith(expected), problem


def test_grid_search_needs_counts() -> None:
    problems = problems_of("""\
    entrypoint: x
    searcher: {name: grid, metric: m}
    hyperparameters:
      a: {type: int, minval: 1, maxval: 3, count: 3}
      b: {type: double, minval: 0, maxval: 1}
      c: {type: categorical, vals: [1, 2]}
      n:
        d: {type: log, minval: 0, maxval: 1, base: 2}
    """)
    assert problems == [
        "hyperparameters.b.count (line 5): grid search is in use but this double hyperparameter"
        " has no count; add count: <number of grid points> to it",
        "hyperparameters.n.d.count (line 8): grid search is in use but this log hyperparameter"
        " has no count; add count: <number of grid points> to it",
    ]


def test_a_grid_count_given_but_wrong_is_named_once_never_as_missing() -> None:
    """Issue 37: a count that is there but invalid (or where none belongs) was also called
    'not provided'."""
    problems = problems_of("""\
    entrypoint: x
    searcher: {name: grid, metric: m}
    hyperparameters:
      a: {type: int, minval: 1, maxval: 3, count: 0}
      b: {type: double, minval: 0, maxval: 1, count: "4"}
      c: {type: categorical, vals: [1, 2], count: 2}
      n:
        d: {type: log, minval: 0, maxval: 1, base: 2, count: 2.5}
        e: {type: const, val: 1, count: 1}
        f: {type: double, minval: 0, maxval: 1, count: null}
    """)
    assert problems == [
        "hyperparameters.a.count (line 4): must be an integer between 1 and 100000 (grid"
        " points), got 0 (an integer)",
        "hyperparameters.b.count (line 5): must be an integer between 1 and 100000 (grid"
        " points), got '4' (a string)",
        "hyperparameters.c.count (line 6): a categorical hyperparameter takes no count (count"
        " is for int, double and log ones; a grid takes every value of its vals); remove it",
        "hyperparameters.n.d.count (line 8): must be an integer between 1 and 100000 (grid"
        " points), got 2.5 (a number)",
        "hyperparameters.n.e.count (line 9): a const hyperparameter takes no count (count is"
        " for int, double and log ones; a grid takes its one value); remove it",
        "hyperparameters.n.f.count (line 10): grid search is in use but this double"
        " hyperparameter has no count; add count: <number of grid points> to it",
    ]


def test_a_grid_whose_counts_are_all_there_has_no_count_problem() -> None:
    problems = problems_of("""\
    entrypoint: x
    searcher: {name: grid, metric: m}
    hyperparameters:
      a: {type: int, minval: 1, maxval: 3, count: 3}
      b: {type: double, minval: 2, maxval: 1, count: 4}
    """)
    assert problems == ["hyperparameters.b.minval (line 5): minval (2) must be less than maxval"
                        " (1); for a fixed value use {type: const, val: 2}"]


# -------------------------------------------------------------------------------- searcher


def test_adaptive_asha_needs_a_length() -> None:
    base = "entrypoint: x\nsearcher: {name: adaptive_asha, metric: m, max_trials: 4"
    neither = only_problem(base + "}\n")
    assert neither.startswith(
        "searcher (line 2): the `adaptive_asha` searcher requires `max_time` and `time_metric`"
        " to be set"
    )
    half = only_problem(base + ", max_time: 10}\n")
    assert half.startswith("searcher.time_metric (line 2): the `adaptive_asha` searcher requires")


def test_searcher_keys_are_per_method() -> None:
    problem = only_problem("entrypoint: x\nsearcher: {name: single, metric: m, max_trials: 3}\n")
    assert problem.startswith("searcher.max_trials (line 2): unknown key")
    random = only_problem("entrypoint: x\nsearcher: {name: random, metric: m}\n")
    assert random == "searcher.max_trials (line 2): is required for the random searcher: an" \
        " integer between 1 and 100000"


def test_searcher_value_checks() -> None:
    problems = problems_of("""\
    entrypoint: x
    searcher:
      name: adaptive_asha
      metric: m
      max_trials: 8
      max_length: {epochs: 0}
      mode: wild
      divisor: 1
      max_concurrent_trials: -1
    """)
    assert problems == [
        "searcher.max_length.epochs (line 6): must be an integer >= 1, got 0 (an integer)",
        "searcher.max_concurrent_trials (line 9): must be an integer between 0 and 100000, got"
        " -1 (an integer)",
        "searcher.mode (line 7): must be one of standard, aggressive, conservative; got 'wild'"
        " (a string)",
        "searcher.divisor (line 8): must be a number > 1 and <= 1e+06, got 1 (an integer)",
    ]


# ------------------------------------------------------------------------ slurm / pbs sections


@pytest.mark.parametrize(
    ("entry", "owned", "use"),
    [
        ("--array=0-3", "--array", "searcher.max_concurrent_trials"),
        ("-a 0-3", "--array", "searcher.max_concurrent_trials"),
        ("--job-name=x", "--job-name", "set name"),
        ("-J x", "--job-name", "set name"),
        ("--output=o.txt", "--output", "run directory"),
        ("-o o.txt", "--output", "run directory"),
        ("--error=e.txt", "--error", "run directory"),
        ("-e e.txt", "--error", "run directory"),
        ("--nodes=2", "--nodes", "resources.slots_per_trial"),
        ("-N 2", "--nodes", "resources.slots_per_trial"),
        ("--ntasks=4", "--ntasks", "resources.slots_per_trial"),
        ("--ntasks-per-node=4", "--ntasks", "resources.slots_per_trial"),
        ("--gpus=2", "--gpus", "resources.slots_per_trial"),
        ("--gpus-per-task=1", "--gpus", "slurm.gpu_type"),
        ("--signal=B:USR1@60", "--signal", "preemption_timeout"),
        ("--parsable", "--parsable", "sbatch's reply"),
        ("--wrap='echo hi'", "--wrap", "entrypoint"),
        ("--chdir=/tmp", "--chdir", "context directory"),
        ("-D /tmp", "--chdir", "context directory"),
        ("--time=01:00:00", "--time", "slurm.walltime"),
        ("-t 60", "--time", "slurm.walltime"),
        ("--partition=gpu", "--partition", "slurm.partition or resources.resource_pool"),
        ("-p gpu", "--partition", "slurm.partition"),
        ("--mem=4G --time=10", "--time", "slurm.walltime"),
    ],
)
def test_sbatch_args_deny_list(entry: str, owned: str, use: str) -> None:
    problem = only_problem(MINIMAL + f"slurm:\n  sbatch_args:\n    - {json.dumps(entry)}\n")
    assert problem.startswith(
        f"slurm.sbatch_args[0] (line 5): {entry!r} sets {owned}, which hpcdet sets itself; "
    ), problem
    assert use in problem


def test_allowed_sbatch_args_pass() -> None:
    args = ["--mem=16G", "--exclusive", "--constraint=a100", "--gres=nvme:1",
            "--cpus-per-task=4", "--qos=low"]
    config = load(MINIMAL + f"slurm: {{sbatch_args: {json.dumps(args)}}}\n")
    assert config.slurm.sbatch_args == args


def test_sbatch_args_shape_errors() -> None:
    problems = problems_of(MINIMAL + "slurm: {sbatch_args: [mem=4G, 3]}\n")
    assert problems == [
        "slurm.sbatch_args[0] (line 3): must be an option starting with '-', such as"
        " '--mem=16G'; got 'mem=4G'",
        "slurm.sbatch_args[1] (line 3): must be a string such as '--mem=16G', got 3 (an integer)",
    ]


def test_pbsbatch_args_deny_list() -> None:
    problems = problems_of(
        MINIMAL + "pbs: {pbsbatch_args: ['-l walltime=1:00:00', '-q big', '-l mem=4gb']}\n"
    )
    assert problems == [
        "pbs.pbsbatch_args[0] (line 3): '-l walltime=1:00:00' sets -l walltime, which hpcdet"
        " sets itself; use pbs.walltime",
        "pbs.pbsbatch_args[1] (line 3): '-q big' sets -q, which hpcdet sets itself; use"
        " pbs.queue or resources.resource_pool",
    ]


def test_slurm_and_pbs_sections() -> None:
    config = load(MINIMAL + textwrap.dedent("""\
    slurm:
      slots_per_node: 4
      gpu_type: a100
      sbatch_args: [--mem=32G]
      walltime: 1-12:00:00
      partition: gpu
      account: proj
      qos: normal
    pbs:
      slots_per_node: 2
      pbsbatch_args: [-l mem=4gb]
      walltime: "02:00:00"
      queue: workq
      account: proj
    """))
    slurm, pbs = config.slurm, config.pbs
    assert (slurm.slots_per_node, slurm.gpu_type, slurm.sbatch_args) == (4, "a100", ["--mem=32G"])
    assert slurm.walltime_seconds == 36 * 3600
    assert (slurm.partition, slurm.account, slurm.qos) == ("gpu", "proj", "normal")
    assert (pbs.slots_per_node, pbs.pbsbatch_args, pbs.walltime_seconds) == (
        2, ["-l mem=4gb"], 7200,
    )
    assert (pbs.queue, pbs.account) == ("workq", "proj")
    assert config.raw["slurm"]["walltime"] == "1-12:00:00"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("02:00:00", 7200),
        ("2:00:00", 7200),
        ("48:00:00", 172800),
        ("1-00:00:00", 86400),
        ("1-12", 86400 + 12 * 3600),
        ("1-12:30", 86400 + 12 * 3600 + 30 * 60),
        ("90", 5400),
        (90, 5400),
        ("30:15", 1815),
        ("90m", 5400),
        ("90min", 5400),
        ("2h", 7200),
        ("1h30m", 5400),
        ("1d", 86400),
        ("45s", 45),
    ],
)
def test_walltime_parsing(value: object, seconds: int) -> None:
    assert parse_walltime(value) == seconds


@pytest.mark.parametrize("value", ["", "abc", "1:75:00", "0", 0, -5, 1.5, True, "2 hours"])
def test_walltime_rejects(value: object) -> None:
    with pytest.raises(ValueError, match="walltime"):
        parse_walltime(value)


def test_walltime_error_in_config_says_what_to_write() -> None:
    problem = only_problem(MINIMAL + "slurm: {walltime: forever}\n")
    assert problem == (
        "slurm.walltime (line 3): is not a walltime: 'forever'; use 'HH:MM:SS', 'D-HH:MM:SS',"
        " '90m', '2h', '1d12h' or a whole number of minutes"
    )


def test_slots_per_node_must_divide_multi_node_trials() -> None:
    problem = only_problem(MINIMAL + "resources: {slots_per_trial: 6}\nslurm: {slots_per_node: 4}")
    assert problem.startswith("slurm.slots_per_node (line 4): resources.slots_per_trial (6) must")
    assert load(MINIMAL + "resources: {slots_per_trial: 8}\nslurm: {slots_per_node: 4}\n")


# ------------------------------------------------------------ storage, environment, bind mounts


def test_cloud_storage_is_not_supported_yet() -> None:
    problem = only_problem(MINIMAL + "checkpoint_storage: {type: s3, bucket: b}\n")
    assert problem == (
        "checkpoint_storage.type (line 3): s3 checkpoint storage is not supported on hpcdet yet;"
        " use type: shared_fs with a host_path on a filesystem every compute node mounts"
    )


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        ("{type: shared_fs, host_path: /a, storage_path: /b}",
         "checkpoint_storage.storage_path (line 3): storage_path must either be a relative"
         " directory or a subdirectory of host_path"),
        ("{type: shared_fs, host_path: /a, storage_path: ../b}",
         "checkpoint_storage.storage_path (line 3): storage_path must either be a relative"
         " directory or a subdirectory of host_path"),
        ("{type: shared_fs}",
         "checkpoint_storage.host_path (line 3): is required: an absolute path"),
        ("{type: shared_fs, host_path: rel}",
         "checkpoint_storage.host_path (line 3): must be an absolute path, got 'rel'"),
        ("{type: directory}",
         "checkpoint_storage.container_path (line 3): is required: an absolute path"),
        ("{type: nfs}",
         "checkpoint_storage.type (line 3): must be shared_fs or directory, got 'nfs'"),
        ("{host_path: /a, save_trial_best: 2}",
         "checkpoint_storage.host_path (line 3): needs the storage's type: without one,"
         " checkpoint_storage may only set save_experiment_best, save_trial_best,"
         " save_trial_latest; add type: shared_fs"),
        ("{save_trial_best: -1}",
         "checkpoint_storage.save_trial_best (line 3): must be an integer >= 0"),
        ("{type: shared_fs, host_path: /a, save_trial_best: -1}",
         "checkpoint_storage.save_trial_best (line 3): must be an integer >= 0"),
    ],
)
def test_checkpoint_storage_mistakes(storage: str, expected: str) -> None:
    problem = only_problem(MINIMAL + f"checkpoint_storage: {storage}\n")
    assert problem.startswith(expected), problem


def test_environment_is_normalised() -> None:
    config = load(MINIMAL + textwrap.dedent("""\
    environment:
      image: /images/torch.sif
      environment_variables: [A=1, B=x=y]
    """))
    env = config.environment
    assert env.image == "/images/torch.sif"
    assert env.variables == {"A": "1", "B": "x=y"}
    assert config.raw["environment"]["image"] == dict.fromkeys(("cpu", "cuda", "rocm"),
                                                               "/images/torch.sif")
    per_device = load(MINIMAL + textwrap.dedent("""\
    resources: {slots_per_trial: 0}
    environment:
      image: {cpu: cpu.sif, cuda: gpu.sif}
      environment_variables: {cpu: [X=cpu], cuda: [X=gpu]}
    """)).environment
    assert per_device.image == "cpu.sif" and per_device.variables == {"X": "cpu"}
    assert per_device.variables_by_device["cuda"] == {"X": "gpu"}
    # Determined's official examples name the CUDA image gpu.
    aliased = load(MINIMAL + "environment:\n  image: {cpu: c.sif, gpu: g.sif}\n")
    assert aliased.raw["environment"]["image"] == {"cpu": "c.sif", "cuda": "g.sif", "rocm": None}


def test_environment_mistakes() -> None:
    problems = problems_of(MINIMAL + textwrap.dedent("""\
    environment:
      image: {gpu: x.sif, cuda: y.sif}
      environment_variables: [NOEQUALS, =1]
      force_pull_image: yes please
    """))
    assert problems == [
        "environment.image.gpu (line 4): gpu is Determined's other name for cuda, and both are"
        " set to different values; keep one of them",
        "environment.environment_variables[0] (line 5): must be 'NAME=value', e.g."
        " 'OMP_NUM_THREADS=4'; got 'NOEQUALS' (a string)",
        "environment.environment_variables[1] (line 5): must be 'NAME=value', e.g."
        " 'OMP_NUM_THREADS=4'; got '=1' (a string)",
        "environment.force_pull_image (line 6): must be true or false, got 'yes please'"
        " (a string)",
    ]


def test_bind_mounts() -> None:
    config = load(MINIMAL + "bind_mounts:\n  - {host_path: /data, container_path: /d,"
                  " read_only: true}\n")
    mount = config.bind_mounts[0]
    assert (mount.host_path, mount.container_path, mount.read_only, mount.propagation) == (
        "/data", "/d", True, "rprivate",
    )
    problem = only_problem(MINIMAL + "bind_mounts:\n  - {host_path: /data, container_path: .}\n")
    assert problem == (
        "bind_mounts[0].container_path (line 4): container_path must not be \".\"; mount into a"
        " subdirectory such as ./data"
    )


def test_workspace_and_project_go_together() -> None:
    problem = only_problem(MINIMAL + "workspace: lab\n")
    assert problem == "project: workspace and project must both be set or both be left out"


def test_opaque_sections_are_kept() -> None:
    config = load(MINIMAL + textwrap.dedent("""\
    profiling: {enabled: true}
    optimizations: {aggregation_frequency: 2}
    log_policies: [{pattern: ".*OOM.*", action: {type: cancel_retries}}]
    retention_policy: {log_retention_days: 5}
    integrations: {pachyderm: {}}
    tensorboard_storage: {type: shared_fs}
    """))
    assert config.raw["profiling"] == {"enabled": True}
    assert config.raw["log_policies"][0]["pattern"] == ".*OOM.*"
    problem = only_problem(MINIMAL + "profiling: [1]\n")
    assert problem == "profiling (line 3): must be a mapping, got a list"


# ---------------------------------------------------------------------------------- round trip


def test_to_dict_from_dict_round_trip() -> None:
    config = load(MINIMAL + textwrap.dedent("""\
    hyperparameters:
      lr: 0.1
      n: {a: {type: int, minval: 1, maxval: 2}}
    environment: {image: x.sif, environment_variables: [A=1]}
    checkpoint_storage: {type: shared_fs, host_path: /s}
    bind_mounts: [{host_path: /a, container_path: /b}]
    slurm: {walltime: 2h, sbatch_args: [--mem=1G]}
    """))
    stored = json.loads(json.dumps(config.to_dict()))
    rebuilt = ExperimentConfig.from_dict(stored)
    assert rebuilt == config
    assert rebuilt.to_dict() == config.to_dict()
    assert rebuilt.experiment_seed == config.experiment_seed


def test_to_dict_is_a_copy() -> None:
    config = load(MINIMAL)
    config.to_dict()["searcher"]["metric"] = "changed"
    assert config.raw["searcher"]["metric"] == "loss"


def test_from_dict_rejects_invalid() -> None:
    with pytest.raises(ConfigError) as info:
        ExperimentConfig.from_dict({"entrypoint": "x"})
    assert info.value.source == "stored experiment config"


def test_where_the_checkpoints_of_an_experiment_go(tmp_path: Path) -> None:
    default = tmp_path / "state" / "checkpoints"
    base = "name: x\nentrypoint: e\nsearcher: {name: single, metric: m, max_length: 1}\n"
    assert load_experiment_config(base).checkpoint_dir(default) == default
    shared = base + "checkpoint_storage: {type: shared_fs, host_path: /scratch, storage_path: me}\n"
    assert load_experiment_config(shared).checkpoint_dir(default) == Path("/scratch/me")
    host_only = base + "checkpoint_storage: {type: shared_fs, host_path: /scratch}\n"
    assert load_experiment_config(host_only).checkpoint_dir(default) == Path("/scratch")
    directory = base + "checkpoint_storage: {type: directory, container_path: /ckpt}\n"
    assert load_experiment_config(directory).checkpoint_dir(default) == Path("/ckpt")


def test_a_trial_class_entrypoint_runs_the_torch_launcher() -> None:
    base = {"name": "x", "searcher": {"name": "single", "metric": "x", "max_length": 1},
            "hyperparameters": {"global_batch_size": 8}}
    for entrypoint, spec in (("model_def:MNistTrial", "model_def:MNistTrial"),
                             (" pkg.model_def:Trial ", "pkg.model_def:Trial")):
        cfg = ExperimentConfig.from_dict({**base, "entrypoint": entrypoint})
        assert cfg.is_trial_class and cfg.entrypoint == entrypoint  # stored as written
        assert cfg.command == ["python3", "-m", "hpcdet.launch.torch_distributed", "--trial",
                               spec]
    for command in ("python3 train.py", "python3 -c 'print(1)'", "echo a:b"):
        cfg = ExperimentConfig.from_dict({**base, "entrypoint": command})
        assert not cfg.is_trial_class and cfg.command == command


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"hyperparameters": {}},
         "hyperparameters.global_batch_size: the trial class model_def:T needs the hyperparameter"
         " global_batch_size"),
        ({"resources": {"slots_per_trial": 4}, "hyperparameters": {"global_batch_size": 30}},
         "hyperparameters.global_batch_size: 30 is not divisible by resources.slots_per_trial"
         " \\(4\\)"),
        ({"searcher": {"name": "single", "metric": "x"}},
         "searcher: a trial class trains for searcher.max_length"),
    ],
)
def test_what_a_trial_class_needs_is_named(extra: dict[str, Any], message: str) -> None:
    base = {"name": "x", "entrypoint": "model_def:T", "hyperparameters": {"global_batch_size": 8},
            "searcher": {"name": "single", "metric": "x", "max_length": 1}}
    with pytest.raises(ConfigError, match=message):
        ExperimentConfig.from_dict({**base, **extra})
    timed = {"name": "adaptive_asha", "metric": "x", "max_trials": 2, "time_metric": "batches",
             "max_time": 10}
    assert ExperimentConfig.from_dict({**base, "searcher": timed}).is_trial_class
