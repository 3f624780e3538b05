"""deepspeed: hostfile, environment and command as data; the launcher without deepspeed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hpcdet.launch.deepspeed import (
    build_command,
    build_env,
    deepspeed_env_lines,
    hostfile_path,
    hostfile_text,
    master_address,
)
from tests.unit.launch.launch_support import PY, make_layout, trial_env, write_info

DS = [PY, "-m", "hpcdet.launch.deepspeed"]


def test_hostfile() -> None:
    assert hostfile_text(["10.0.0.1"], 4) == "localhost slots=4\n"
    assert hostfile_text(["10.0.0.1", "10.0.0.2"], 2) == "10.0.0.1 slots=2\n10.0.0.2 slots=2\n"
    assert hostfile_path("7.1", "/tmp") == Path(f"/tmp/hpcdet-{os.getuid()}/hostfile-7.1.txt")
    assert [master_address(["10.0.0.1"]), master_address(["a", "b"])] == ["localhost", "a"]


def test_single_node_command() -> None:
    assert build_command(
        hostfile="/tmp/hostfile-7.1.txt", master_addr="localhost",
        script=["python3", "train.py"], overrides=["--master_port", "29600"],
    ) == [
        "deepspeed", "-H", "/tmp/hostfile-7.1.txt", "--master_addr", "localhost",
        "--no_python", "--no_local_rank", "--no_ssh_check", "--master_port", "29600", "--",
        "python3", "-I", "-m", "hpcdet.launch.wrap_rank", "RANK", "--", "python3", "train.py",
    ]  # fmt: skip


def test_multi_node_command_enters_each_node() -> None:
    assert build_command(
        hostfile="/tmp/h.txt", master_addr="10.0.0.1", script=["python3", "t.py"],
        python="/py", step_dir="/runs/7/1/launch/deepspeed-0",
    ) == [
        "deepspeed", "-H", "/tmp/h.txt", "--master_addr", "10.0.0.1",
        "--no_python", "--no_local_rank", "--no_ssh_check", "--",
        "/py", "-I", "-m", "hpcdet.launch.node_step", "--node-var", "CROSS_RANK",
        "/runs/7/1/launch/deepspeed-0", "--",
        "/py", "-I", "-m", "hpcdet.launch.wrap_rank", "RANK", "--", "python3", "t.py",
    ]  # fmt: skip


def test_env() -> None:
    layout = make_layout(addrs=("10.0.0.1", "10.0.0.2"))
    base = {"HPCDET_X": "1"}
    assert build_env(layout, "/tmp/h.txt", base) == {
        "DET_DEEPSPEED_HOSTFILE_PATH": "/tmp/h.txt", "DET_CHIEF_IP": "10.0.0.1",
        "USE_DEEPSPEED": "1",
    }
    gpus = {"CUDA_VISIBLE_DEVICES": "0,1", "DET_INTER_NODE_NETWORK_INTERFACE": "ib0"}
    assert build_env(layout, "/h", gpus)["NCCL_SOCKET_IFNAME"] == "ib0"
    assert "NCCL_SOCKET_IFNAME" not in build_env(
        layout, "/h", {**gpus, "NCCL_SOCKET_IFNAME": "eth0"}
    )
    no_gpus = {"DET_INTER_NODE_NETWORK_INTERFACE": "ib0"}
    assert "NCCL_SOCKET_IFNAME" not in build_env(layout, "/h", no_gpus)


def test_deepspeed_env_file_lines() -> None:
    env = {
        "PATH": "/usr/bin", "MSG": "a b 'c'", "OLDPWD": "/x", "HOSTNAME": "n1",
        "CUDA_VISIBLE_DEVICES": "0", "NVIDIA_CUDA_VISIBLE_DEVICES": "0", "SLURM_PROCID": "0",
        "DET_SLOT_IDS": "[0]", "DET_AGENT_ID": "n1", "BASH_FUNC_f%%": "() { :; }",
        "IFS": " \t\n", "SLURM_JOB_ID": "12",
    }
    assert deepspeed_env_lines(env) == [
        "PATH=/usr/bin", "MSG='a b '\"'\"'c'\"'\"''", "SLURM_JOB_ID=12",
    ]


def test_without_deepspeed(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = trial_env(write_info(tmp_path), PATH=str(empty))
    p = subprocess.run([*DS, "python3", "t.py"], capture_output=True, text=True, env=env)
    assert p.returncode == 1
    assert "the deepspeed command is not on PATH" in p.stderr
    assert not (tmp_path / "run").exists()


def test_empty_script(tmp_path: Path) -> None:
    p = subprocess.run([*DS], capture_output=True, text=True, env=trial_env(write_info(tmp_path)))
    assert p.returncode == 1
    assert p.stderr.splitlines() == [
        "usage: python3 -m hpcdet.launch.deepspeed [[DEEPSPEED_ARGS...] --] SCRIPT...",
        "error: empty script is not allowed",
    ]
    shim = subprocess.run([PY, "-m", "determined.launch.deepspeed"], capture_output=True,
                          text=True, env=trial_env(write_info(tmp_path)))
    assert shim.returncode == 1 and "error: empty script is not allowed" in shim.stderr
