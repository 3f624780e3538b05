"""node_step: the chief's step and its peers, and how a worker enters its own node."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from hpcdet.launch.node_step import (
    NodeEntry,
    StepArgs,
    claim_step_dir,
    enter_command,
    load_entry,
    parse_args,
    publish,
    run_step,
    wait_for_nodes,
)
from tests.unit.launch.launch_support import PY, make_layout, trial_env


def test_claims_count_launches_per_node(tmp_path: Path) -> None:
    first = [claim_step_dir(tmp_path, "mpi", rank) for rank in (0, 1)]
    second = [claim_step_dir(tmp_path, "mpi", rank) for rank in (1, 0)]
    assert first == [tmp_path / "launch" / "mpi-0"] * 2
    assert second == [tmp_path / "launch" / "mpi-1"] * 2
    assert claim_step_dir(tmp_path, "deepspeed", 0) == tmp_path / "launch" / "deepspeed-0"


def test_entry_here_keeps_node_variables_only() -> None:
    env = {"HPCDET_CLUSTER_INFO": "/r/nodes/1.json", "DET_AGENT_ID": "node2", "HOME": "/root"}
    assert NodeEntry.here("/tmp/w", env) == NodeEntry(
        "/tmp/w", {"HPCDET_CLUSTER_INFO": "/r/nodes/1.json", "DET_AGENT_ID": "node2"}
    )


def test_publish_and_wait(tmp_path: Path) -> None:
    assert load_entry(tmp_path, 0) is None
    publish(tmp_path, 1, NodeEntry("/b", {"X": "1"}))
    with pytest.raises(TimeoutError, match="nodes 0 did not join"):
        wait_for_nodes(tmp_path, 2, timeout=0.3, poll=0.05)
    publish(tmp_path, 0, NodeEntry("/a"))
    assert wait_for_nodes(tmp_path, 2) == [NodeEntry("/a"), NodeEntry("/b", {"X": "1"})]


def test_enter_command() -> None:
    assert enter_command("/py", "SLURM_NODEID", Path("/s"), ["a", "b"]) == [
        "/py", "-I", "-m", "hpcdet.launch.node_step", "--node-var", "SLURM_NODEID", "/s", "--",
        "a", "b",
    ]  # fmt: skip
    assert parse_args(["--node-var", "V", "/s", "--", "a", "b"]) == StepArgs(
        "V", Path("/s"), ["a", "b"])
    cmd = enter_command("/py", "V", "/s", ["a"], {"WORLD_SIZE": "4", "X": "a=b"},
                        {"RANK": "SLURM_PROCID"})
    assert cmd[6:] == ["--set=WORLD_SIZE=4", "--set=X=a=b", "--copy=RANK=SLURM_PROCID", "/s",
                       "--", "a"]
    assert parse_args(cmd[4:]) == StepArgs("V", Path("/s"), ["a"], {"WORLD_SIZE": "4", "X": "a=b"},
                                           {"RANK": "SLURM_PROCID"})


@pytest.mark.parametrize("argv", [
    ["/s", "--", "a"],
    ["--node-var", "V", "/s", "a"],
    ["--node-var", "V", "--set=X", "/s", "--", "a"],
    ["--node-var", "V", "--other=X=1", "/s", "--", "a"],
    ["--node-var", "V", "--set=X=1", "--", "a"],
])
def test_bad_command_lines(argv: list[str]) -> None:
    with pytest.raises(ValueError):
        parse_args(argv)


def test_step_runs_once_and_peers_wait(tmp_path: Path) -> None:
    """Three nodes: only the chief runs the command, after all published; peers return 0."""
    ran: list[list[str]] = []

    def runner(cmd: Sequence[str], env: Mapping[str, str]) -> int:
        assert len(list(tmp_path.glob("node-*.json"))) == 3
        ran.append(list(cmd))
        return 3

    addrs = ("a", "b", "c")
    results: dict[int, int] = {}

    def node(rank: int) -> None:
        results[rank] = run_step(make_layout(addrs=addrs, rank=rank), tmp_path,
                                 NodeEntry(f"/w{rank}"), ["mpi"], {}, runner)

    threads = [threading.Thread(target=node, args=(r,)) for r in (2, 1, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert ran == [["mpi"]]
    assert results == {0: 3, 1: 0, 2: 0}


def test_step_ends_for_peers_when_the_chief_fails(tmp_path: Path) -> None:
    def runner(cmd: Sequence[str], env: Mapping[str, str]) -> int:
        raise OSError("no srun")

    publish(tmp_path, 1, NodeEntry("/w1"))
    with pytest.raises(OSError):
        run_step(make_layout(addrs=("a", "b")), tmp_path, NodeEntry("/w0"), ["x"], {}, runner)
    # The peer sees the end at once.
    assert run_step(make_layout(addrs=("a", "b"), rank=1), tmp_path, NodeEntry("/w1"), ["x"],
                    {}, runner) == 0


def test_worker_enters_its_node(tmp_path: Path) -> None:
    step = tmp_path / "step"
    node_dir = tmp_path / "node1-work"
    node_dir.mkdir()
    publish(step, 0, NodeEntry(str(tmp_path), {"HPCDET_CLUSTER_INFO": "/n/0.json"}))
    publish(step, 1, NodeEntry(str(node_dir), {"HPCDET_CLUSTER_INFO": "/n/1.json"}))
    show = ("import os; e = os.environ; print(os.getcwd(), e['HPCDET_CLUSTER_INFO'], e['KEEP'], "
            "e['SIZE'], e['RANK'], e['EMPTY'] == '')")
    cmd = enter_command(PY, "MY_NODE", step, [PY, "-c", show], {"SIZE": "4"},
                        {"RANK": "MY_PROC", "EMPTY": "UNSET_VAR"})
    env = trial_env(None, MY_NODE="1", KEEP="kept", HPCDET_CLUSTER_INFO="/n/0.json", MY_PROC="3",
                    SIZE="1")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(node_dir), "/n/1.json", "kept", "4", "3", "True"]


@pytest.mark.parametrize(
    ("node", "message"), [("", "is '', not a node rank"), ("4", "node 4 has not published")]
)
def test_worker_without_node(tmp_path: Path, node: str, message: str) -> None:
    cmd = enter_command(PY, "MY_NODE", tmp_path, ["true"])
    p = subprocess.run(cmd, capture_output=True, text=True, env=trial_env(None, MY_NODE=node))
    assert p.returncode == 1 and message in p.stderr
