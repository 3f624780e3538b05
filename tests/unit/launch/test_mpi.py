"""mpi: the Slurm step and mpiexec commands as data, then real MPI ranks on this machine."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hpcdet.launch.mpi import build_env, build_mpiexec_command
from hpcdet.launch.rank_step import Ranks, build_step_command
from hpcdet.node_env import SLURM_MPI_STEP, NodeEnv
from tests.unit.launch.launch_support import PY, make_layout, trial_env, write_info

MPI = [PY, "-m", "hpcdet.launch.mpi"]


def test_srun_command() -> None:
    assert NodeEnv.detect({"SLURM_JOB_ID": "5"}).mpi_step is SLURM_MPI_STEP
    assert NodeEnv.detect({"PBS_JOBID": "5.s"}).mpi_step is None
    assert build_step_command(
        SLURM_MPI_STEP, num_nodes=2, procs_per_node=4, step_dir="/runs/7/1/launch/mpi-0",
        ranks=Ranks(["python3", "train.py"], SLURM_MPI_STEP.rank_vars),
        overrides=["--mpi=pmix"], python="/py", cpus_per_rank=2,
    ) == [
        "srun", "--overlap", "--mpi=pmi2", "--nodes=2", "--ntasks=8", "--ntasks-per-node=4",
        "--cpus-per-task=2", "--distribution=block", "--kill-on-bad-exit=1", "--export=ALL",
        "--mpi=pmix",
        "/py", "-I", "-m", "hpcdet.launch.node_step", "--node-var", "SLURM_NODEID",
        "/runs/7/1/launch/mpi-0", "--",
        "/py", "-I", "-m", "hpcdet.launch.wrap_rank", "PMI_RANK,SLURM_PROCID", "--",
        "python3", "train.py",
    ]  # fmt: skip


@pytest.mark.parametrize(("cpus", "procs", "share"), [
    (None, 2, 1), ("2", 2, 1), ("16", 4, 4), ("6", 4, 1), ("1", 4, 1), ("x", 1, 1),
])
def test_each_rank_gets_its_share_of_the_nodes_cpus(cpus: str | None, procs: int,
                                                     share: int) -> None:
    env = {} if cpus is None else {"SLURM_CPUS_ON_NODE": cpus}
    assert SLURM_MPI_STEP.cpus_per_rank(env, procs) == share


def test_mpiexec_command() -> None:
    assert build_mpiexec_command(procs=3, script=["python3", "t.py"], overrides=["-v"]) == [
        "mpiexec", "-n", "3", "-v",
        "python3", "-I", "-m", "hpcdet.launch.wrap_rank", "PMI_RANK", "--",
        "python3", "t.py",
    ]  # fmt: skip


def test_env() -> None:
    assert build_env(make_layout(addrs=("10.0.0.1", "10.0.0.2"))) == {"DET_CHIEF_IP": "10.0.0.1"}


def test_empty_script(tmp_path: Path) -> None:
    p = subprocess.run([*MPI, "--"], capture_output=True, text=True,
                       env=trial_env(write_info(tmp_path)))
    assert p.returncode == 1
    assert p.stderr.splitlines() == [
        "usage: python3 -m hpcdet.launch.mpi [[STEP_OVERRIDES...] --] SCRIPT...",
        "error: empty script is not allowed",
    ]


def test_several_nodes_need_slurm(tmp_path: Path) -> None:
    info = write_info(tmp_path, addrs=["10.0.0.1", "10.0.0.2"])
    p = subprocess.run([*MPI, "python3", "t.py"], capture_output=True, text=True,
                       env=trial_env(info))
    assert p.returncode == 1 and "needs a batch system that starts one" in p.stderr


def test_ranks_form_one_world(tmp_path: Path) -> None:
    """Without Slurm, mpiexec starts one rank per slot; mpi4py sees them as one world."""
    pytest.importorskip("mpi4py")
    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not installed")
    script = tmp_path / "w.py"
    script.write_text(
        "import os, sys\n"
        "from mpi4py import MPI\n"
        "comm = MPI.COMM_WORLD\n"
        "total = sum(comm.allgather(1))\n"
        "print(comm.Get_rank(), comm.Get_size(), total, os.environ['DET_CHIEF_IP'])\n"
        "sys.exit(int(sys.argv[1]) if comm.Get_rank() == 1 else 0)\n"
    )
    env = trial_env(write_info(tmp_path, slots=3))
    ok = subprocess.run([*MPI, PY, str(script), "0"], capture_output=True, text=True, env=env,
                        timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert sorted(ok.stdout.splitlines()) == [
        "[rank=0] 0 3 3 127.0.0.1", "[rank=1] 1 3 3 127.0.0.1", "[rank=2] 2 3 3 127.0.0.1",
    ]
    failed = subprocess.run([*MPI, PY, str(script), "5"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert failed.returncode == 5
