"""DistributedContext over TCP: 4 workers on 2 "nodes" of 127.0.0.1, as threads or processes.

Every test uses its own port (the chief binds port 0 and the others learn the port), so the
tests run in parallel with each other and with real trials.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from hpcdet import core
from hpcdet.core._events import RunEvents
from hpcdet.core._preempt import PreemptWatcher
from hpcdet.core._slurm_env import first_hostname, parse_tasks_per_node
from hpcdet.rundir.event_writer import EventWriter
from hpcdet.rundir.events import read_events

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[3]
SIZE, PER_NODE = 4, 2


def _layout(rank: int, size: int = SIZE, per_node: int = PER_NODE) -> dict[str, int]:
    return {
        "rank": rank, "size": size, "local_rank": rank % per_node, "local_size": per_node,
        "cross_rank": rank // per_node, "cross_size": size // per_node,
    }


def _in_threads(fn: Callable[[int], T], n: int = SIZE, timeout: float = 30) -> list[T]:
    """``fn(rank)`` for every rank in its own thread; fails if a rank raises or hangs."""
    results: dict[int, T] = {}
    errors: dict[int, BaseException] = {}

    def run(rank: int) -> None:
        try:
            results[rank] = fn(rank)
        except BaseException as e:
            errors[rank] = e

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    hung = [r for r, t in enumerate(threads) if t.is_alive()]
    assert not hung, f"ranks {hung} did not finish within {timeout} s"
    if errors:
        raise next(iter(errors.values()))
    return [results[r] for r in range(n)]


Contexts = Callable[..., list[core.DistributedContext]]


@pytest.fixture
def contexts() -> Iterator[Contexts]:
    """Builds the workers of one trial (chief on a free port); closes them all afterwards."""
    made: list[core.DistributedContext] = []

    def make(size: int = SIZE, per_node: int = PER_NODE) -> list[core.DistributedContext]:
        chief = core.TcpTransport(
            rank=0, size=size, local_rank=0, local_size=per_node, cross_rank=0, port=0
        )
        port = chief.listen()
        ctxs = [core.DistributedContext(**_layout(0, size, per_node), transport=chief)]
        # The other workers get the default transport, as user code does.
        ctxs += [
            core.DistributedContext(
                **_layout(r, size, per_node), chief_ip="127.0.0.1", pub_port=port
            )
            for r in range(1, size)
        ]
        made.extend(ctxs)
        return ctxs

    yield make
    for d in sorted(made, key=lambda d: d.rank == 0):  # the chief waits for the others
        d.close()


def test_collectives_give_determineds_results(contexts: Contexts) -> None:
    ctxs = contexts()
    big = os.urandom(3 << 20)

    def work(rank: int) -> list[Any]:
        d = ctxs[rank]
        return [
            d.allgather(rank * 10),
            d.gather(f"g{rank}"),
            d.broadcast(f"b{rank}"),
            d.allgather_local(rank),
            d.gather_local(rank),
            d.broadcast_local(f"l{rank}"),
            d.broadcast(big if rank == 0 else None) == big,
        ]

    out = _in_threads(work)
    assert out[0] == [[0, 10, 20, 30], ["g0", "g1", "g2", "g3"], "b0", [0, 1], [0, 1], "l0", True]
    assert out[1] == [[0, 10, 20, 30], None, "b0", [0, 1], None, "l0", True]
    assert out[2] == [[0, 10, 20, 30], None, "b0", [2, 3], [2, 3], "l2", True]
    assert out[3] == [[0, 10, 20, 30], None, "b0", [2, 3], None, "l2", True]


def test_nodes_run_local_collectives_while_the_chief_is_busy(contexts: Contexts) -> None:
    ctxs = contexts()
    node1_done = threading.Event()

    def work(rank: int) -> list[Any]:
        d = ctxs[rank]
        if d.cross_rank == 0:
            # The chief's main thread is elsewhere: the relay serves node 1 on its own.
            assert node1_done.wait(10)
            return [d.allgather(rank)]
        local = [d.allgather_local(rank + i) for i in range(3)]
        if d.local_rank == 0:
            node1_done.set()
        return [d.allgather(rank), local]

    out = _in_threads(work)
    assert out[0] == out[1] == [[0, 1, 2, 3]]
    assert out[2] == out[3] == [[0, 1, 2, 3], [[2, 3], [3, 4], [4, 5]]]


def test_workers_ask_chief_preemption_is_synchronised(contexts: Contexts, tmp_path: Path) -> None:
    ctxs = contexts()
    preempt_file = tmp_path / "preempt"
    events_path = tmp_path / "events.jsonl"

    def work(rank: int) -> list[bool]:
        watcher = PreemptWatcher(preempt_file, tmp_path / "control.json", interval=0.02)
        events = RunEvents(EventWriter(events_path) if rank == 0 else None)
        preempt = core.PreemptContext(ctxs[rank], watcher, events)
        preempt.start()
        answers: list[bool] = []
        try:
            while not (answers and answers[-1]) and len(answers) < 500:
                answers.append(preempt.should_preempt())
                if rank == 0 and len(answers) == 4:
                    preempt_file.touch()
                time.sleep(0.01)
        finally:
            preempt.close()
            events.close()
        return answers

    out = _in_threads(work)
    assert out[0][-1] is True and out[0][:4] == [False] * 4
    assert out[1] == out[2] == out[3] == out[0]
    assert [e.type for e in read_events(events_path, 0)] == ["preempt_ack"]


def test_sharded_store_path_writes_one_checkpoint(contexts: Contexts, tmp_path: Path) -> None:
    ctxs = contexts()
    storage = tmp_path / "checkpoints"
    events_path = tmp_path / "events.jsonl"

    def work(rank: int) -> str:
        events = RunEvents(EventWriter(events_path) if rank == 0 else None)
        ckpt = core.CheckpointContext(ctxs[rank], storage, events)
        metadata = {"steps_completed": 5, "framework": "none", f"rank{rank}": rank}
        try:
            with ckpt.store_path(metadata, shard=True) as (path, storage_id):
                (path / f"shard-{rank}").write_text(str(rank))
        finally:
            events.close()
        return storage_id

    ids = _in_threads(work)
    assert len(set(ids)) == 1 and [p.name for p in storage.iterdir()] == ids[:1]
    expected = {"steps_completed": 5, "framework": "none", **{f"rank{r}": r for r in range(4)}}
    [event] = read_events(events_path, 0)
    assert event.type == "checkpoint" and event.body["metadata"] == expected
    assert {f"shard-{r}" for r in range(4)} < set(event.body["resources"])
    assert core.DummyCheckpointContext(
        core.DummyDistributedContext(), storage
    ).get_metadata(ids[0]) == expected


def test_different_collectives_fail_on_every_rank(contexts: Contexts) -> None:
    ctxs = contexts(size=2, per_node=2)

    def work(rank: int) -> str:
        with pytest.raises(RuntimeError) as err:
            if rank == 0:
                ctxs[0].allgather(0)
            else:
                ctxs[1].broadcast(1)
        return str(err.value)

    for message in _in_threads(work, n=2):
        assert "collective mismatch among the trial: rank 0 called allgather, rank 1 called " \
            "broadcast" in message


def test_collectives_after_a_worker_closed_fail(contexts: Contexts) -> None:
    ctxs = contexts(size=2, per_node=2)
    assert _in_threads(lambda r: ctxs[r].allgather(r), n=2) == [[0, 1], [0, 1]]
    ctxs[1].close()
    with pytest.raises(RuntimeError, match="rank 1 already closed its DistributedContext"):
        ctxs[0].allgather(0)
    with pytest.raises(RuntimeError, match="called after the DistributedContext was closed"):
        ctxs[1].allgather(1)


def test_the_chief_refuses_a_second_worker_with_the_same_rank(contexts: Contexts) -> None:
    ctxs = contexts(size=2, per_node=2)
    _in_threads(lambda r: ctxs[r].allgather(r), n=2)
    chief = ctxs[0]._transport
    assert isinstance(chief, core.TcpTransport)
    intruder = core.TcpTransport(
        rank=1, size=2, local_rank=1, local_size=2, cross_rank=0,
        port=int(chief.address.rsplit(":", 1)[1]),
    )
    with pytest.raises(RuntimeError, match="refused rank 1: rank 1 already joined this chief"):
        intruder.allgather(1, local=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_missing_chief_is_named_after_the_timeout() -> None:
    port = _free_port()
    t = core.TcpTransport(
        rank=1, size=2, local_rank=1, local_size=2, cross_rank=0, port=port,
        connect_timeout=0.5,
    )
    start = time.monotonic()
    with pytest.raises(RuntimeError) as err:
        t.allgather(1, local=False)
    assert time.monotonic() - start < 5
    assert f"rank 1 could not reach the chief (rank 0) at 127.0.0.1:{port} within 0.5 s" in str(
        err.value
    )


def test_a_busy_port_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        t = core.TcpTransport(rank=0, size=2, local_rank=0, local_size=2, cross_rank=0, port=port)
        with pytest.raises(RuntimeError, match=f"cannot listen on port {port}.*its own port"):
            t.listen()


_WORKER = """
import os, sys, time
from hpcdet import core
rank, port, dead = (int(a) for a in sys.argv[1:])
t = core.TcpTransport(
    rank=rank, size=4, local_rank=rank % 2, local_size=2, cross_rank=rank // 2, port=port
)
if rank == 0:
    print(t.listen(), flush=True)
d = core.DistributedContext(
    rank=rank, size=4, local_rank=rank % 2, local_size=2, cross_rank=rank // 2, cross_size=2,
    chief_ip="127.0.0.1", transport=t,
)
print("first", d.allgather(rank), flush=True)
if rank == dead:
    os._exit(3)
start = time.monotonic()
try:
    d.allgather_local(rank) if rank == 2 else d.allgather(rank)
except RuntimeError as e:
    print(f"raised after {time.monotonic() - start:.1f} s: {e}", flush=True)
d.close()
"""


@pytest.mark.parametrize("dead", [3, 0])
def test_a_dead_process_makes_the_others_raise_promptly(dead: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def start(rank: int, port: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(rank), str(port), str(dead)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )

    procs = [start(0, 0)]
    assert procs[0].stdout is not None
    port = int(procs[0].stdout.readline())
    procs += [start(r, port) for r in range(1, SIZE)]
    # The results go to stdout and the relay's log to stderr, apart: the chief logs the lost
    # worker from its relay thread while its main thread may still be printing.
    outputs = [p.communicate(timeout=30) for p in procs]
    for rank, (proc, (stdout, stderr)) in enumerate(zip(procs, outputs)):
        out = stdout + stderr
        assert "first [0, 1, 2, 3]\n" in stdout, out
        if rank == dead:
            assert proc.returncode == 3, out
            continue
        assert proc.returncode == 0, out
        assert "raised after 0." in out, out
        if dead == 0:
            assert "lost its connection to the chief (rank 0) at 127.0.0.1" in out, out
        else:
            assert "rank 3 (node 1) lost its connection to the chief" in out, out


SLURM_ENV = {
    "SLURM_PROCID": "3", "SLURM_NTASKS": "8", "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_NNODES": "3",
    "SLURM_STEP_NUM_NODES": "2", "SLURM_TASKS_PER_NODE": "4(x2)",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_STEP_NODELIST": "localhost,node9",
    "SLURM_JOB_ID": "598", "SLURM_STEP_ID": "0",
}


def _address(d: core.DistributedContext) -> str:
    assert isinstance(d._transport, core.TcpTransport)
    return d._transport.address


def test_from_slurm_reads_the_step_layout() -> None:
    d = core.DistributedContext.from_slurm(SLURM_ENV)
    assert (d.rank, d.size, d.local_rank, d.local_size, d.cross_rank, d.cross_size) == (
        3, 4, 1, 2, 1, 2
    )
    # Multi-node without DET_CHIEF_IP: the step's first node, and a per-step port.
    assert _address(d) == f"127.0.0.1:{12360 + zlib.crc32(b'598.0') % 1000}"


def test_from_slurm_chief_ip_and_port_overrides() -> None:
    env = {**SLURM_ENV, "DET_CHIEF_IP": "10.0.0.7", "INTER_TRAIN_PROCESS_COMM_PORT_1": "13000"}
    assert _address(core.DistributedContext.from_slurm(env)) == "10.0.0.7:13000"
    assert _address(core.DistributedContext.from_slurm(env, chief_ip="h")) == "h:13000"


def test_from_slurm_uneven_nodes_and_job_level_variables() -> None:
    env = {
        "SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "SLURM_NODEID": "1",
        "SLURM_NNODES": "2", "SLURM_TASKS_PER_NODE": "3,1", "DET_CHIEF_IP": "h",
    }
    d = core.DistributedContext.from_slurm(env)
    assert (d.local_rank, d.local_size, d.cross_rank, d.cross_size) == (0, 1, 1, 2)


def test_from_slurm_names_missing_variables() -> None:
    env = {k: v for k, v in SLURM_ENV.items() if k not in ("SLURM_PROCID", "SLURM_LOCALID")}
    with pytest.raises(ValueError) as err:
        core.DistributedContext.from_slurm(env)
    assert str(err.value) == (
        "from_slurm() needs SLURM_PROCID, SLURM_LOCALID in the environment; start the workers "
        "with srun, which sets them"
    )


def test_slurm_list_formats() -> None:
    assert parse_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert first_hostname("gpu[08-10,12],cpu1") == "gpu08"
    assert first_hostname("node1,node2") == "node1"
    with pytest.raises(ValueError):
        parse_tasks_per_node("two")


_MPI_WORKER = """
from hpcdet import core
d = core.DistributedContext.from_mpi4py()
row = [d.rank, d.size, d.local_rank, d.local_size, d.cross_rank, d.cross_size,
       d.allgather(d.rank), d.gather(d.rank), d.broadcast(d.rank + 100), d.allgather_local(d.rank)]
rows = d.gather(row)  # one process prints: mpiexec may interleave the ranks' output
if rows is not None:
    print(rows, flush=True)
d.close()
"""


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="needs mpiexec (pip install mpich)")
def test_from_mpi4py_on_one_node() -> None:
    pytest.importorskip("mpi4py")
    proc = subprocess.run(
        ["mpiexec", "-n", "3", sys.executable, "-c", _MPI_WORKER],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == str([
        [0, 3, 0, 3, 0, 1, [0, 1, 2], [0, 1, 2], 100, [0, 1, 2]],
        [1, 3, 1, 3, 0, 1, [0, 1, 2], None, 100, [0, 1, 2]],
        [2, 3, 2, 3, 0, 1, [0, 1, 2], None, 100, [0, 1, 2]],
    ])
