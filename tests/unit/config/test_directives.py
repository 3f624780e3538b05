"""Values that reach a batch script's directive lines are refused at load, with their YAML path,
the character at fault and what to write instead (issue 9, item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcdet.config import cluster as cluster_module
from hpcdet.config import load_cluster_config, load_experiment_config
from hpcdet.errors import ConfigError

MINIMAL = "entrypoint: python3 train.py\nsearcher: {name: single, metric: loss}\n"
NEWLINE = "gpu\ntouch /tmp/owned"


@pytest.fixture(autouse=True)
def no_system_site_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_module, "DEFAULT_SITE_PATH", tmp_path / "etc" / "cluster.yaml")


def experiment_problems(section: str, key: str, value: object) -> list[str]:
    text = MINIMAL + f"{section}:\n  {key}: {json.dumps(value)}\n"
    with pytest.raises(ConfigError) as info:
        load_experiment_config(text)
    return info.value.problems


def cluster_problems(tmp_path: Path, text: str) -> list[str]:
    user = tmp_path / "user.yaml"
    user.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_cluster_config(user_path=user, env={"HOME": str(tmp_path)})
    return info.value.problems


@pytest.mark.parametrize(
    ("section", "key"),
    [("slurm", "partition"), ("slurm", "account"), ("slurm", "qos"), ("slurm", "gpu_type"),
     ("resources", "resource_pool"), ("pbs", "queue"), ("pbs", "account")],
)
def test_a_newline_in_a_directive_value_is_refused_with_path_character_and_fix(
    section: str, key: str
) -> None:
    (problem,) = experiment_problems(section, key, NEWLINE)
    assert problem.startswith(f"{section}.{key} (line 4): 'gpu\\ntouch /tmp/owned' contains a"
                              " newline (\\n, U+000A) at character 4"), problem
    assert "remove it" in problem


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("gpu;touch x", "contains ';'"),
        ("$(touch x)", "contains '$'"),
        ("`id`", "contains '`'"),
        ("a b", "contains ' '"),
        ("a'b", "contains \"'\""),
        ("gpu\rx", "a carriage return (\\r, U+000D)"),
        ("gpu\x1b[31m", "an escape (\\x1b, U+001B)"),
        ("gpu\u2028x", "(\\u2028, U+2028)"),
        ("", "must not be empty"),
    ],
)
def test_gpu_type_is_a_slurm_name(value: str, said: str) -> None:
    (problem,) = experiment_problems("slurm", "gpu_type", value)
    assert said in problem and "letters, digits and _ . + -" in problem, problem


def test_slurm_names_and_lists_that_slurm_takes_load() -> None:
    config = load_experiment_config(
        MINIMAL + "slurm: {partition: 'gpu-a100,debug', account: proj_1.a+b, qos: low,"
        " gpu_type: a100_80g}\nresources: {resource_pool: gpu}\n"
    )
    assert config.slurm.partition == "gpu-a100,debug"
    assert (config.slurm.account, config.slurm.qos, config.slurm.gpu_type) == (
        "proj_1.a+b", "low", "a100_80g")
    assert "comma-separated list of names" in experiment_problems("slurm", "partition", "a,,b")[0]
    assert "contains ','" in experiment_problems("slurm", "account", "a,b")[0]


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("--mem=4G\ntouch /tmp/owned", "a newline (\\n, U+000A) at character 9"),
        ("--comment=a\rb", "a carriage return"),
        ("--comment='\n", "\"--comment='\\n\" contains a newline"),
        ("-c 4", "write one long option per entry, '--name' or '--name=value'"),
        ("--mem 4G", "'--name=value' with no spaces"),
        ("--comment=x;touch", None),
        ("--account=a;b", "the value of --account, 'a;b', contains ';'"),
        ("--qos=$(id)", "the value of --qos, '$(id)', contains '$'"),
    ],
)
def test_sbatch_args_are_long_options_on_one_line(entry: str, said: str | None) -> None:
    text = MINIMAL + f"slurm: {{sbatch_args: [{json.dumps(entry)}]}}\n"
    if said is None:
        # One shell word on a comment line, quoted: sbatch reads it as one option.
        assert load_experiment_config(text).slurm.sbatch_args == [entry]
        return
    with pytest.raises(ConfigError) as info:
        load_experiment_config(text)
    (problem,) = info.value.problems
    assert problem.startswith("slurm.sbatch_args[0] (line 3): ") and said in problem, problem


def test_environment_variable_names_are_shell_names() -> None:
    problems = experiment_problems(
        "environment", "environment_variables", ["A;touch /tmp/owned=1", "1X=2", "OK_1=$(id)"])
    assert problems == [
        "environment.environment_variables[0] (line 4): the variable name 'A;touch /tmp/owned'"
        " contains ';', which is not allowed here; use a shell variable name: letters, digits"
        " and _, not starting with a digit, e.g. 'OMP_NUM_THREADS'",
        "environment.environment_variables[1] (line 4): the variable name '1X' is not in the"
        " form needed here; use a shell variable name: letters, digits and _, not starting"
        " with a digit, e.g. 'OMP_NUM_THREADS'",
    ]


def test_pbsbatch_args_stay_on_their_line() -> None:
    (problem,) = experiment_problems("pbs", "pbsbatch_args", ["-l mem=4gb\ntouch /tmp/owned"])
    assert problem.startswith(
        "pbs.pbsbatch_args[0] (line 4): '-l mem=4gb\\ntouch /tmp/owned' contains a newline")


@pytest.mark.parametrize("key", ["account", "qos", "gpu_type", "default_pool"])
def test_cluster_file_directive_values_are_checked(tmp_path: Path, key: str) -> None:
    (problem,) = cluster_problems(tmp_path, f"{key}: {json.dumps(NEWLINE)}\n")
    assert problem.startswith(f"{key} (line 1): 'gpu\\ntouch /tmp/owned' contains a newline")


def test_the_site_file_is_checked_too(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("gpu_type: 'a100 --wrap=id'\n")
    with pytest.raises(ConfigError) as info:
        load_cluster_config(site_path=site, env={"HOME": str(tmp_path)})
    assert f"cluster config {site}" in str(info.value)
    assert "gpu_type (line 1): 'a100 --wrap=id' contains ' '" in str(info.value)


def test_cluster_file_partitions_are_checked(tmp_path: Path) -> None:
    problems = cluster_problems(
        tmp_path, 'partitions: {gpu: "a\\nb", cpu: normal, big: "x y", bad: 3}\n')
    assert [p.split(":")[0] for p in problems] == [
        "partitions.gpu (line 1)", "partitions.big (line 1)", "partitions.bad (line 1)"]
    assert "a newline" in problems[0] and "contains ' '" in problems[1]
    assert "must be a string, got 3" in problems[2]
