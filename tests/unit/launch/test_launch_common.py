"""The launchers' shared command line, node layout and child runner."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hpcdet.launch._launch import (
    LaunchError,
    NodeLayout,
    UsageError,
    exit_code,
    load_layout,
    split_overrides,
    trial_script,
    wrap_rank_command,
)
from hpcdet.rundir.spec import ClusterInfoRecord
from tests.unit.launch.launch_support import PY, trial_env, write_info


@pytest.mark.parametrize(
    ("argv", "overrides", "script"),
    [
        (["python3", "train.py"], [], ["python3", "train.py"]),
        (["--", "python3", "train.py"], [], ["python3", "train.py"]),
        (["--nproc_per_node", "1", "--", "python3", "t.py"], ["--nproc_per_node", "1"],
         ["python3", "t.py"]),
        # Only the first -- separates; the script keeps its own.
        (["--a", "--", "python3", "t.py", "--", "x"], ["--a"], ["python3", "t.py", "--", "x"]),
        (["python3", "t.py", "--", "x"], ["python3", "t.py"], ["x"]),
    ],
)
def test_split_overrides(argv: list[str], overrides: list[str], script: list[str]) -> None:
    assert split_overrides(argv) == (overrides, script)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "empty script is not allowed"),
        (["--"], "empty script is not allowed"),
        (["--max_restarts", "1", "--"], "empty script is not allowed"),
    ],
)
def test_split_overrides_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        split_overrides(argv)


def test_a_trial_class_runs_the_pytorch_harness_under_the_torch_launcher_only() -> None:
    harness = ["py", "-m", "hpcdet.pytorch.harness", "model_def:MyTrial"]
    assert trial_script("py", ["--trial", "model_def:MyTrial"], "torch_distributed") == harness
    assert trial_script("py", ["--trial=model_def:MyTrial"], "torch_distributed") == harness
    assert trial_script("py", ["python3", "train.py"], "mpi") == ["python3", "train.py"]
    with pytest.raises(UsageError, match="run under hpcdet.launch.torch_distributed, not mpi"):
        trial_script("py", ["--trial", "model_def:MyTrial"], "mpi")
    for bad in (["--trial"], ["--trial", "a:B", "extra"], ["--trial", "no_class"]):
        with pytest.raises(UsageError, match="--trial takes one trial class"):
            trial_script("py", bad, "torch_distributed")


def test_help_is_a_usage_error_without_message() -> None:
    for flag in ("-h", "--help"):
        with pytest.raises(UsageError) as info:
            split_overrides([flag])
        assert str(info.value) == ""


def test_wrap_rank_command() -> None:
    assert wrap_rank_command("py", "RANK", ["python3", "t.py", "--x"]) == [
        "py", "-I", "-m", "hpcdet.launch.wrap_rank", "RANK", "--", "python3", "t.py", "--x",
    ]


def test_layout_from_record(tmp_path: Path) -> None:
    info = write_info(tmp_path, addrs=["10.0.0.1", "10.0.0.2"], rank=1, slots=4)
    layout = NodeLayout.from_record(ClusterInfoRecord.load(info))
    assert layout == NodeLayout(
        addrs=("10.0.0.1", "10.0.0.2"), node_rank=1, slots_per_node=4, allocation_id="7.1",
        run_dir=str(tmp_path / "run"),
    )
    assert (layout.num_nodes, layout.chief_ip) == (2, "10.0.0.1")
    assert load_layout({"HPCDET_CLUSTER_INFO": str(info)}, "x") == layout


def test_load_layout_off_cluster(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="runs inside an hpcdet trial"):
        load_layout({}, "hpcdet.launch.mpi")
    with pytest.raises(LaunchError, match="cannot read the cluster info"):
        load_layout({"HPCDET_CLUSTER_INFO": str(tmp_path / "missing.json")}, "x")


def test_exit_code() -> None:
    assert [exit_code(0), exit_code(3), exit_code(-15)] == [0, 3, 143]


def test_signals_reach_the_child(tmp_path: Path) -> None:
    """SIGTERM to the launcher goes on to its child; the child's exit code comes back."""
    child = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    runner = (
        "import os, sys\n"
        "from hpcdet.launch._launch import run_forwarding_signals\n"
        f"sys.exit(run_forwarding_signals([sys.executable, '-c', {child!r}], os.environ))\n"
    )
    p = subprocess.Popen([PY, "-c", runner], stdout=subprocess.PIPE, text=True,
                         env=trial_env(None))
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    start = time.monotonic()
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == 7
    assert time.monotonic() - start < 10


def test_missing_program_is_127() -> None:
    p = subprocess.run(
        [PY, "-c", "import os, sys\nfrom hpcdet.launch._launch import run_forwarding_signals\n"
         "sys.exit(run_forwarding_signals(['/nonexistent/tool'], os.environ))"],
        capture_output=True, text=True,
    )
    assert p.returncode == 127 and "cannot run '/nonexistent/tool'" in p.stderr


def test_wrap_rank_keeps_inherited_descriptors() -> None:
    """MPI hands each rank its PMI connection as an inherited fd (PMI_FD); it must survive."""
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    try:
        p = subprocess.run(
            [PY, "-m", "hpcdet.launch.wrap_rank", "0", "--", PY, "-c",
             f"import os; os.write({write_end}, b'through')"],
            pass_fds=(write_end,), capture_output=True, text=True, env=trial_env(None),
        )
        assert p.returncode == 0, p.stderr
        os.close(write_end)
        write_end = -1
        assert os.read(read_end, 100) == b"through"
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
