"""Interactive tasks' pure parts: Determined's job config turned into a one-trial experiment,
the notebook's idle rules, the shell's environment file, and the commands that join a job."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hpcdet.config.task import load_task_config
from hpcdet.errors import ConfigError
from hpcdet.remote.forward import split_cluster
from hpcdet.schedulers import make_scheduler
from launchers.hold import rc_text
from launchers.notebook import in_use, jupyter_argv


def test_a_command_is_a_one_trial_experiment_without_restarts() -> None:
    task = load_task_config("command", None, ["resources.slots=2", "description=prep"],
                            ["python3", "prep.py", "--n", "a b"])
    raw = task.experiment.raw
    assert raw["entrypoint"] == ["python3", "prep.py", "--n", "a b"]
    assert (raw["max_restarts"], raw["searcher"]["name"]) == (0, "single")
    assert task.experiment.resources.slots_per_trial == 2
    assert task.experiment.name == "Command (prep)"
    one = load_task_config("command", None, [], ["echo a && echo b"]).experiment
    assert one.raw["entrypoint"] == ["sh", "-c", "echo a && echo b"]
    assert one.name == "Command (echo a && echo b)"


def test_work_dir_is_where_the_task_starts(tmp_path: Path) -> None:
    argv = load_task_config("command", None, ["work_dir=/tmp/it's here"], ["pwd"]
                            ).experiment.raw["entrypoint"]
    out = subprocess.run(argv[:4] + ["/"] + argv[5:], capture_output=True, text=True)
    assert out.stdout == "/\n" and argv[4] == "/tmp/it's here"


def test_a_notebook_runs_jupyterlab_with_its_idle_settings(tmp_path: Path) -> None:
    cfg = tmp_path / "nb.yaml"
    cfg.write_text("idle_timeout: 1h30m\nnotebook_idle_type: activity\n"
                   "environment: {environment_variables: [A=1]}\n")
    task = load_task_config("notebook", cfg)
    assert task.idle_timeout == 5400
    assert task.experiment.raw["entrypoint"] == [
        "python3", "-m", "hpcdet.launch.notebook", "--idle-type", "activity",
        "--idle-timeout", "5400"]
    assert task.experiment.name == "Notebook"
    shell = load_task_config("shell", None).experiment.raw["entrypoint"]
    assert shell == ["python3", "-m", "hpcdet.launch.hold"]


def test_every_problem_is_named_with_its_path(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("resources: {slots_per_trial: 2, slotz: 1}\nidle_timeout: soon\n"
                   "notebook_idle_type: never\nentrypoint: python3 x.py\n")
    with pytest.raises(ConfigError) as e:
        load_task_config("notebook", cfg)
    text = str(e.value)
    for path in ("resources.slots_per_trial", "resources.slotz", "idle_timeout",
                 "notebook_idle_type", "entrypoint"):
        assert path in text, (path, text)
    with pytest.raises(ConfigError, match="applies to notebooks only"):
        load_task_config("shell", None, ["idle_timeout=5m"])
    with pytest.raises(ConfigError, match="hpcdet cmd run"):
        load_task_config("command", None)


def test_idle_rules_follow_determineds_idle_types() -> None:
    kernel = {"connections": 0}
    assert in_use("kernels_or_terminals", [kernel], [], {}, 100.0, 10)
    assert not in_use("kernels_or_terminals", [], [], {}, 100.0, 10)
    assert not in_use("kernel_connections_or_terminals", [kernel], [], {}, 100.0, 10)
    assert in_use("kernel_connections_or_terminals", [{"connections": 1}], [], {}, 100.0, 10)
    assert in_use("kernel_connections_or_terminals", [], [{"name": "1"}], {}, 100.0, 10)
    recent = {"last_activity": "1970-01-01T00:01:35Z"}  # 95 s after the epoch
    assert in_use("activity", [], [], recent, 100.0, 10)
    assert not in_use("activity", [kernel], [], recent, 120.0, 10)


def test_jupyterlab_gets_no_token_on_its_command_line() -> None:
    argv = jupyter_argv("/py", "10.0.0.1", 8888, "/proxy/3/", "/work")
    assert "--ServerApp.base_url=/proxy/3/" in argv and not any("token" in a for a in argv)


def test_the_shell_environment_file_restores_every_value_as_it_was(tmp_path: Path) -> None:
    weird = "a b'c\"$HOME`x`\n\\"
    rc = tmp_path / "shell.rc"
    rc.write_text(rc_text({"SECRET": weird, "SLURM_STEP_ID": "0", "SLURM_JOB_ID": "7",
                           "PWD": "/elsewhere", "not-a-name": "x"}, str(tmp_path)))
    out = subprocess.run(["bash", "-c", f". {rc}; printf '%s|%s|%s|%s' \"$SECRET\" "
                          "\"${SLURM_STEP_ID-unset}\" \"$SLURM_JOB_ID\" \"$PWD\""],
                         capture_output=True, text=True)
    assert out.stdout == f"{weird}|unset|7|{tmp_path}", out


def test_joining_a_job_is_a_step_on_slurm_local_here_and_refused_on_pbs() -> None:
    slurm = make_scheduler("slurm", {})
    assert slurm.join_command("12_3", ["bash", "-i"]) == [
        "srun", "--overlap", "--jobid=12_3", "--nodes=1", "--ntasks=1", "--pty", "bash", "-i"]
    assert make_scheduler("local", {"jobs_dir": "/x"}).join_command("1", ["bash"]) == ["bash"]
    pbs = make_scheduler("pbs", {})
    assert pbs.join_command("1.server", ["bash"]) is None
    assert "qsub -I" in pbs.join_refused()


def test_the_command_of_cmd_run_keeps_its_own_dash_c() -> None:
    assert split_cluster(["-c", "hpc", "cmd", "run", "python3", "-c", "print(1)"]) == (
        "hpc", ["cmd", "run", "python3", "-c", "print(1)"])
    assert split_cluster(["cmd", "list", "-c", "hpc"]) == ("hpc", ["cmd", "list"])
