"""torch_distributed: the torchrun command as data, then the launcher as a program."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from hpcdet.launch._launch import LaunchError
from hpcdet.launch.rank_step import build_step_command
from hpcdet.launch.torch_distributed import (
    build_command,
    build_env,
    command_for,
    master_address,
    master_port,
    step_ranks,
)
from hpcdet.node_env import SLURM_MPI_STEP
from tests.support import require_modules
from tests.unit.launch.launch_support import PY, make_layout, trial_env, write_info

TD = [PY, "-m", "hpcdet.launch.torch_distributed"]


def test_single_node_command() -> None:
    assert build_command(
        num_nodes=1, procs_per_node=4, node_rank=0, master_addr="localhost",
        master_port=29400, script=["python3", "train.py", "--epochs", "2"],
    ) == [
        "python3", "-m", "torch.distributed.run",
        "--nnodes", "1", "--nproc_per_node", "4", "--node_rank", "0", "--max_restarts", "0",
        "--master_addr", "localhost", "--master_port", "29400",
        "--module", "hpcdet.launch.wrap_rank", "RANK", "--",
        "python3", "train.py", "--epochs", "2",
    ]  # fmt: skip


def test_multi_node_command_with_overrides() -> None:
    layout = make_layout(addrs=("10.0.0.1", "10.0.0.2"), rank=1, slots=2)
    cmd = command_for(layout, {"C10D_PORT": "29555"}, ["python3", "t.py"],
                      overrides=["--rdzv_endpoint=10.0.0.9:1234"], python="/py")
    assert cmd == [
        "/py", "-m", "torch.distributed.run",
        "--nnodes", "2", "--nproc_per_node", "2", "--node_rank", "1", "--max_restarts", "0",
        "--master_addr", "10.0.0.1", "--master_port", "29555",
        "--rdzv_endpoint=10.0.0.9:1234",
        "--module", "hpcdet.launch.wrap_rank", "RANK", "--", "python3", "t.py",
    ]  # fmt: skip


def test_master_address_and_port() -> None:
    assert master_address(["10.0.0.1"]) == "localhost"
    assert master_address(["10.0.0.1", "10.0.0.2"]) == "10.0.0.1"
    assert master_port({}) == 29400
    assert master_port({"C10D_PORT": ""}) == 29400
    assert master_port({"C10D_PORT": "30000"}) == 30000
    for bad in ("http", "0", "70000"):
        with pytest.raises(LaunchError, match="C10D_PORT"):
            master_port({"C10D_PORT": bad})


def test_env() -> None:
    layout = make_layout(addrs=("10.0.0.1", "10.0.0.2"), rank=1)
    assert build_env(layout) == {"USE_TORCH_DISTRIBUTED": "True", "DET_CHIEF_IP": "10.0.0.1"}


def test_on_slurm_each_worker_is_a_task_of_one_step() -> None:
    """torchrun's variables: the worker's own from Slurm's per-task ones, the rest set."""
    layout = make_layout(addrs=("10.0.0.1", "10.0.0.2"), rank=0, slots=2)
    ranks = step_ranks(SLURM_MPI_STEP, layout, 28005, ["python3", "t.py"])
    cmd = build_step_command(SLURM_MPI_STEP, num_nodes=2, procs_per_node=2, step_dir="/s",
                             ranks=ranks, python="/py")
    assert cmd == [
        "srun", "--overlap", "--mpi=pmi2", "--nodes=2", "--ntasks=4", "--ntasks-per-node=2",
        "--cpus-per-task=1", "--distribution=block", "--kill-on-bad-exit=1", "--export=ALL",
        "/py", "-I", "-m", "hpcdet.launch.node_step", "--node-var", "SLURM_NODEID",
        "--set=WORLD_SIZE=4", "--set=LOCAL_WORLD_SIZE=2", "--set=GROUP_WORLD_SIZE=2",
        "--set=MASTER_ADDR=10.0.0.1", "--set=MASTER_PORT=28005",
        f"--set=TORCHELASTIC_RUN_ID={layout.allocation_id}",
        "--set=TORCHELASTIC_RESTART_COUNT=0", "--set=TORCHELASTIC_MAX_RESTARTS=0",
        "--set=TORCHELASTIC_USE_AGENT_STORE=True",
        "--set=USE_TORCH_DISTRIBUTED=True", "--set=DET_CHIEF_IP=10.0.0.1",
        "--copy=RANK=SLURM_PROCID", "--copy=LOCAL_RANK=SLURM_LOCALID",
        "--copy=GROUP_RANK=SLURM_NODEID", "--copy=ROLE_RANK=SLURM_PROCID",
        "/s", "--",
        "/py", "-I", "-m", "hpcdet.launch.wrap_rank", "RANK", "--", "python3", "t.py",
    ]  # fmt: skip


@pytest.mark.parametrize("argv", [[], ["--"], ["--nnodes", "1", "--"]])
def test_empty_script(argv: list[str], tmp_path: Path) -> None:
    p = subprocess.run([*TD, *argv], capture_output=True, text=True,
                       env=trial_env(write_info(tmp_path)))
    assert p.returncode == 1
    assert p.stderr.splitlines() == [
        "usage: python3 -m hpcdet.launch.torch_distributed [[TORCH_OVERRIDES...] --] SCRIPT...",
        "error: empty script is not allowed",
    ]


def test_determined_spelling(tmp_path: Path) -> None:
    p = subprocess.run([PY, "-m", "determined.launch.torch_distributed"], capture_output=True,
                       text=True, env=trial_env(write_info(tmp_path)))
    assert p.returncode == 1 and "error: empty script is not allowed" in p.stderr


def test_off_cluster(tmp_path: Path) -> None:
    p = subprocess.run([*TD, "python3", "t.py"], capture_output=True, text=True,
                       env=trial_env(None))
    assert p.returncode == 1 and "runs inside an hpcdet trial" in p.stderr


def test_real_torchrun(tmp_path: Path) -> None:
    """Two workers on one node: ranks from torchrun, lines tagged, exit code propagated."""
    require_modules("torch")
    script = tmp_path / "w.py"
    script.write_text(
        "import os, sys\n"
        "keys = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'GROUP_RANK', 'USE_TORCH_DISTRIBUTED',"
        " 'DET_CHIEF_IP')\n"
        "print(' '.join(os.environ[k] for k in keys))\n"
        "sys.exit(int(sys.argv[1]) if os.environ['RANK'] == '1' else 0)\n"
    )
    env = trial_env(write_info(tmp_path, slots=2), C10D_PORT="29461")
    ok = subprocess.run([*TD, PY, str(script), "0"], capture_output=True, text=True,
                        env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    lines = sorted(line for line in ok.stdout.splitlines() if line.startswith("[rank="))
    assert lines == ["[rank=0] 0 2 0 0 True 127.0.0.1", "[rank=1] 1 2 1 0 True 127.0.0.1"]
    failed = subprocess.run([*TD, PY, str(script), "3"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert failed.returncode == 1  # torchrun reports a failed worker as 1


def test_torchrun_options_on_slurm_keep_a_torchrun_a_node(tmp_path: Path) -> None:
    """Given torchrun's own options, the launcher runs torchrun, and says so."""
    require_modules("torch")
    env = trial_env(write_info(tmp_path), SLURM_JOB_ID="7", C10D_PORT="29611")
    p = subprocess.run([*TD, "--max_restarts", "0", "--", PY, "-c", "print('ran')"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "torchrun options given (--max_restarts 0)" in p.stderr
    assert "[rank=0] ran" in p.stdout


_WORKER = """
import os, pathlib, signal, sys, time
def checkpoint_and_exit(signum, frame):  # as hpcdet.core._preempt makes a trial do
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the others: torchrun's, wrap_rank's
    sys.exit(0)
if sys.argv[2] == "checkpoint":
    signal.signal(signal.SIGTERM, checkpoint_and_exit)
pathlib.Path(sys.argv[1], "ready-" + os.environ["RANK"]).touch()
time.sleep(60)
"""


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.mark.parametrize(("workers_do", "ok"), [("checkpoint", True), ("die", False)])
def test_the_jobs_sigterm_fails_torchrun_but_not_workers_that_exit_0(
        tmp_path: Path, workers_do: str, ok: bool) -> None:
    """A preemption's or qdel's SIGTERM to every process of the job: torchrun stops its
    workers and exits 1 of it; when every worker exited 0 (it checkpointed), the node's exit
    code is 0, so that the run ends as preempted, not failed."""
    require_modules("torch")
    script = tmp_path / "w.py"
    script.write_text(_WORKER)
    env = trial_env(write_info(tmp_path, slots=2), C10D_PORT=_free_port())
    p = subprocess.Popen([*TD, PY, str(script), str(tmp_path), workers_do], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("ready-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(list(tmp_path.glob("ready-*"))) == 2, "the workers did not start"
    os.killpg(p.pid, signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert (p.returncode == 0) == ok, err
    said = "all 2 workers on this node exited 0, so the node's exit code is 0"
    assert (said in err) == ok, err
