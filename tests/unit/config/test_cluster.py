from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from hpcdet.config import ClusterConfig, load_cluster_config
from hpcdet.config import cluster as cluster_module
from hpcdet.errors import ConfigError


@pytest.fixture(autouse=True)
def no_system_site_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Never read a real /etc/hpcdet/cluster.yaml from the machine running the tests.
    monkeypatch.setattr(cluster_module, "DEFAULT_SITE_PATH", tmp_path / "etc" / "cluster.yaml")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_no_files_gives_defaults(tmp_path: Path) -> None:
    config = load_cluster_config(env={"HOME": str(tmp_path)})
    assert config == ClusterConfig()
    assert config.backend == "auto"
    assert config.min_poll_interval == 5.0
    assert config.submissions_per_minute == 30
    assert config.container_runtime == "apptainer"
    assert config.max_jobs is None and config.site_path is None and config.user_path is None
    assert {source for _, _, source in config.describe()} == {"default"}


def test_default_file_locations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = write(tmp_path / "etc" / "cluster.yaml", "account: site-acct\n")
    user = write(tmp_path / "home" / ".config" / "hpcdet" / "cluster.yaml", "qos: high\n")
    config = load_cluster_config(env={"HOME": str(tmp_path / "home")})
    assert (config.account, config.qos) == ("site-acct", "high")
    assert (config.site_path, config.user_path) == (str(site), str(user))
    xdg = write(tmp_path / "xdg" / "hpcdet" / "cluster.yaml", "qos: xdg\n")
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(xdg.parents[1])}
    config = load_cluster_config(env=env)
    assert config.qos == "xdg"


def test_environment_variables_name_the_files(tmp_path: Path) -> None:
    site = write(tmp_path / "s.yaml", "account: a\n")
    user = write(tmp_path / "u.yaml", "qos: q\n")
    env = {"HPCDET_SITE_CONFIG": str(site), "HPCDET_CLUSTER_CONFIG": str(user), "HOME": "/x"}
    config = load_cluster_config(env=env)
    assert (config.account, config.qos) == ("a", "q")


def test_user_values_override_site_values(tmp_path: Path) -> None:
    site = write(tmp_path / "site.yaml", """\
        backend: slurm
        partitions: {gpu: gpu-a100, cpu: normal}
        default_pool: gpu
        account: site-acct
        walltime: 2h
        container_runtime: apptainer
        image_dir: /shared/images
    """)
    user = write(tmp_path / "user.yaml", """\
        partitions: {gpu: my-gpu, big: bigmem}
        account: my-acct
        walltime: "1-00:00:00"
        gpu_type: a100
        template_dir: templates
    """)
    config = load_cluster_config(site, user, env={})
    assert config.backend == "slurm"
    assert config.partitions == {"gpu": "my-gpu", "cpu": "normal", "big": "bigmem"}
    assert config.account == "my-acct"
    assert config.walltime_seconds == 86400
    assert config.gpu_type == "a100"
    assert config.template_dir == str(tmp_path / "templates")
    assert config.image_dir == "/shared/images"
    sources = {key: source for key, _, source in config.describe()}
    assert sources["backend"] == "site"
    assert sources["account"] == "user"
    assert sources["partitions"] == "site+user"
    assert sources["gpu_type"] == "user"
    assert sources["qos"] == "default"


def test_partition_for_pool(tmp_path: Path) -> None:
    site = write(tmp_path / "site.yaml", "partitions: {gpu: gpu-a100}\ndefault_pool: gpu\n")
    config = load_cluster_config(site, env={"HOME": str(tmp_path)})
    assert config.partition_for("") == "gpu-a100"
    assert config.partition_for("gpu") == "gpu-a100"
    assert config.partition_for("debug") == "debug"
    assert ClusterConfig().partition_for("") is None


def test_user_may_only_tighten_the_site_caps(tmp_path: Path) -> None:
    site = write(tmp_path / "site.yaml", """\
        min_poll_interval: 10
        submissions_per_minute: 20
        max_jobs: 100
    """)
    looser = write(tmp_path / "looser.yaml", """\
        min_poll_interval: 6
        submissions_per_minute: 60
        max_jobs: 500
    """)
    config = load_cluster_config(site, looser, env={})
    assert (config.min_poll_interval, config.submissions_per_minute, config.max_jobs) == (
        10.0, 20, 100,
    )
    rows = {key: (value, source) for key, value, source in config.describe()}
    assert rows["min_poll_interval"] == ("10.0", "site (capped; user asked 6.0)")
    assert rows["submissions_per_minute"] == ("20", "site (capped; user asked 60)")
    assert rows["max_jobs"] == ("100", "site (capped; user asked 500)")

    tighter = write(tmp_path / "tighter.yaml", """\
        min_poll_interval: 30
        submissions_per_minute: 5
        max_jobs: 10
    """)
    config = load_cluster_config(site, tighter, env={})
    assert (config.min_poll_interval, config.submissions_per_minute, config.max_jobs) == (
        30.0, 5, 10,
    )
    assert config.sources["min_poll_interval"] == "user"


def test_without_site_caps_the_user_sets_load_limits(tmp_path: Path) -> None:
    user = write(tmp_path / "user.yaml", "submissions_per_minute: 100\nmax_jobs: 50\n")
    config = load_cluster_config(user_path=user, env={"HOME": str(tmp_path)})
    assert (config.submissions_per_minute, config.max_jobs) == (100, 50)


@pytest.mark.parametrize("value", [1, 4.9, 0, "fast"])
def test_poll_interval_floor(tmp_path: Path, value: object) -> None:
    user = write(tmp_path / "user.yaml", f"min_poll_interval: {value}\n")
    with pytest.raises(ConfigError) as info:
        load_cluster_config(user_path=user, env={"HOME": str(tmp_path)})
    assert info.value.source == f"cluster config {user}"
    assert info.value.problems[0].startswith(
        "min_poll_interval (line 1): must be a number of seconds >= 5 (hpcdet never polls the"
        " scheduler more often)"
    )


def test_all_problems_reported_with_lines(tmp_path: Path) -> None:
    user = write(tmp_path / "user.yaml", """\
        backend: slurmm
        partition: {gpu: a}
        walltime: forever
        container_runtime: dockr
        submissions_per_minute: 0
    """)
    with pytest.raises(ConfigError) as info:
        load_cluster_config(user_path=user, env={"HOME": str(tmp_path)})
    assert sorted(info.value.problems) == sorted([
        "partition (line 2): unknown key; did you mean 'partitions'?",
        "backend (line 1): must be one of auto, slurm, pbs, local; got 'slurmm' (a string)",
        "walltime (line 3): is not a walltime: 'forever'; use 'HH:MM:SS', 'D-HH:MM:SS', '90m',"
        " '2h', '1d12h' or a whole number of minutes",
        "container_runtime (line 4): must be one of apptainer, singularity, podman, docker, "
        "enroot; got 'dockr' (a string)",
        "submissions_per_minute (line 5): must be an integer >= 1, got 0 (an integer)",
    ])
    assert str(info.value).startswith(f"invalid cluster config {user} (5 problem(s)):")


def test_problems_of_both_files_are_reported_together(tmp_path: Path) -> None:
    site = write(tmp_path / "site.yaml", "max_jobs: -1\n")
    user = write(tmp_path / "user.yaml", "qos: [a]\n")
    with pytest.raises(ConfigError) as info:
        load_cluster_config(site, user, env={})
    assert info.value.source == "cluster config"
    assert info.value.problems == [
        f"{site}: max_jobs (line 1): must be an integer >= 1, got -1 (an integer)",
        f"{user}: qos (line 1): must be a string, got a list; quote the value if needed",
    ]


def test_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_cluster_config(env={"HPCDET_CLUSTER_CONFIG": str(missing), "HOME": str(tmp_path)})
    assert info.value.problems == ["<file>: no such file; create it or unset HPCDET_CLUSTER_CONFIG"]
    with pytest.raises(ConfigError, match="check the path"):
        load_cluster_config(site_path=missing, env={"HOME": str(tmp_path)})


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    user = write(tmp_path / "user.yaml", "backend: slurm\n  qos: [x\n")
    with pytest.raises(ConfigError) as info:
        load_cluster_config(user_path=user, env={"HOME": str(tmp_path)})
    assert info.value.problems[0].startswith("<top level> (line 2, column")


def test_non_mapping_file(tmp_path: Path) -> None:
    user = write(tmp_path / "user.yaml", "- slurm\n")
    with pytest.raises(ConfigError, match="must be a mapping of keys"):
        load_cluster_config(user_path=user, env={"HOME": str(tmp_path)})


def test_empty_file_is_fine(tmp_path: Path) -> None:
    user = write(tmp_path / "user.yaml", "# nothing yet\n")
    config = load_cluster_config(user_path=user, env={"HOME": str(tmp_path)})
    assert config.backend == "auto" and config.user_path == str(user)


def test_describe_rows(tmp_path: Path) -> None:
    user = write(tmp_path / "user.yaml", "walltime: 90m\npartitions: {b: y, a: x}\n")
    config = load_cluster_config(user_path=user, env={"HOME": str(tmp_path)})
    rows = config.describe()
    assert [key for key, _, _ in rows] == [
        "backend", "partitions", "default_pool", "account", "qos", "walltime", "gpu_type",
        "template_dir", "container_runtime", "image_dir", "image_cache", "slot_type", "python",
        "min_poll_interval",
        "submissions_per_minute", "max_jobs", "min_job_minutes", "share_with_group", "daemon_lease",
        "ask_above_slot_hours",
    ]
    table = {key: (value, source) for key, value, source in rows}
    assert table["walltime"] == ("01:30:00", "user")
    assert table["partitions"] == ("a=x, b=y", "user")
    assert table["account"] == ("(not set)", "default")
    assert table["min_poll_interval"] == ("5.0", "default")


def test_home_relative_paths(tmp_path: Path) -> None:
    user = write(tmp_path / "cfg" / "user.yaml", "image_dir: ~/images\ntemplate_dir: /abs/t\n")
    config = load_cluster_config(user_path=user, env={"HOME": "/home/me"})
    assert config.image_dir == "/home/me/images"
    assert config.template_dir == "/abs/t"


def test_a_fifo_or_oversized_cluster_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    """Every CLI call reads the cluster file: a FIFO in its place must not hang it, nor a
    huge file fill its memory."""
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_cluster_config(site_path=tmp_path / "none.yaml", user_path=fifo,
                            env={"HOME": str(tmp_path)})
    big = tmp_path / "big.yaml"
    big.write_text("# padding\n" * 200_000)
    with pytest.raises(ConfigError, match="more than the 1 MiB"):
        load_cluster_config(user_path=big, env={"HOME": str(tmp_path)})
