"""DistributedContext: validation, named constructors, short-circuit collectives, transports."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from hpcdet import core

TORCH_ENV = {
    "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
    "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2",
}


def _layout(d: core.DistributedContext) -> tuple[int, ...]:
    return (d.rank, d.size, d.local_rank, d.local_size, d.cross_rank, d.cross_size)


def test_getters() -> None:
    d = core.DistributedContext(
        rank=3, size=4, local_rank=1, local_size=2, cross_rank=1, cross_size=2, chief_ip="10.0.0.1"
    )
    assert (d.get_rank(), d.get_size(), d.get_local_rank(), d.get_local_size()) == (3, 4, 1, 2)
    assert (d.get_cross_rank(), d.get_cross_size(), d.get_num_agents()) == (1, 2, 2)


def test_multi_node_needs_chief_ip() -> None:
    with pytest.raises(ValueError, match="When cross_size > 1, the chief_ip parameter is required"):
        core.DistributedContext(
            rank=0, size=4, local_rank=0, local_size=2, cross_rank=0, cross_size=2
        )


def test_ranks_must_fit_their_sizes() -> None:
    with pytest.raises(ValueError, match=r"rank=2 must be in \[0, 2\)"):
        core.DistributedContext(
            rank=2, size=2, local_rank=0, local_size=2, cross_rank=0, cross_size=1
        )


def test_keyword_only() -> None:
    with pytest.raises(TypeError):
        core.DistributedContext(0, 1, 0, 1, 0, 1)  # type: ignore[misc]


def test_from_torch_distributed() -> None:
    d = core.DistributedContext.from_torch_distributed(env={**TORCH_ENV, "DET_CHIEF_IP": "10.1"})
    assert _layout(d) == (5, 8, 1, 4, 1, 2)
    assert d._chief_ip == "10.1"


def test_from_torch_distributed_names_missing_variables() -> None:
    env = {k: v for k, v in TORCH_ENV.items() if k not in ("RANK", "GROUP_RANK")}
    with pytest.raises(ValueError) as err:
        core.DistributedContext.from_torch_distributed(chief_ip="h", env=env)
    assert str(err.value) == (
        "from_torch_distributed() needs RANK, GROUP_RANK in the environment; run the script "
        "under torch.distributed.run, which sets them"
    )


def test_from_deepspeed() -> None:
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_SIZE": "2",
           "CROSS_RANK": "0", "CROSS_SIZE": "1"}
    assert _layout(core.DistributedContext.from_deepspeed(env=env)) == (1, 2, 1, 2, 0, 1)


def test_from_horovod() -> None:
    hvd = SimpleNamespace(
        rank=lambda: 2, size=lambda: 4, local_rank=lambda: 0, local_size=lambda: 2,
        cross_rank=lambda: 1, cross_size=lambda: 2,
    )
    d = core.DistributedContext.from_horovod(hvd, env={"DET_CHIEF_IP": "10.0.0.9"})
    assert _layout(d) == (2, 4, 0, 2, 1, 2)


def test_single_process_collectives_short_circuit() -> None:
    d = core.DummyDistributedContext()
    assert d.allgather("a") == ["a"] and d.gather("a") == ["a"] and d.broadcast("a") == "a"
    assert d.allgather_local(1) == [1] and d.gather_local(1) == [1]
    assert d.broadcast_local(1) == 1


def test_one_worker_per_node_short_circuits_local_collectives_only() -> None:
    d = core.DistributedContext(
        rank=1, size=2, local_rank=0, local_size=1, cross_rank=1, cross_size=2, chief_ip="h",
        transport=core.Transport(),
    )
    assert d.broadcast_local("x") == "x"
    with pytest.raises(NotImplementedError, match="has no transport for its collectives"):
        d.allgather("x")


def test_several_workers_get_tcp_to_the_chief_by_default() -> None:
    d = core.DistributedContext(
        rank=1, size=4, local_rank=1, local_size=2, cross_rank=0, cross_size=2,
        chief_ip="10.0.0.1", pub_port=20000, port_offset=5,
    )
    assert isinstance(d._transport, core.TcpTransport)
    assert d._transport.address == "10.0.0.1:20005"
    assert type(core.DummyDistributedContext()._transport) is core.Transport


def test_port_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTER_TRAIN_PROCESS_COMM_PORT_1", "15000")
    d = core.DistributedContext(
        rank=0, size=2, local_rank=0, local_size=2, cross_rank=0, cross_size=1
    )
    assert isinstance(d._transport, core.TcpTransport)
    assert d._transport.address == "127.0.0.1:15000"
    env = {**TORCH_ENV, "INTER_TRAIN_PROCESS_COMM_PORT_1": "15100", "DET_CHIEF_IP": "h"}
    t = core.DistributedContext.from_torch_distributed(env=env)._transport
    assert isinstance(t, core.TcpTransport) and t.address == "h:15100"


def test_a_transport_replaces_chief_ip() -> None:
    d = core.DistributedContext(
        rank=0, size=4, local_rank=0, local_size=2, cross_rank=0, cross_size=2,
        transport=core.Transport(),
    )
    assert d.cross_size == 2


class _Recording(core.Transport):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, bool]] = []
        self.closed = False

    def allgather(self, obj: Any, *, local: bool) -> list[Any]:
        self.calls.append(("allgather", obj, local))
        return [obj, obj]

    def gather(self, obj: Any, *, local: bool) -> list[Any] | None:
        self.calls.append(("gather", obj, local))
        return None

    def broadcast(self, obj: Any, *, local: bool) -> Any:
        self.calls.append(("broadcast", obj, local))
        return "chief's"

    def close(self) -> None:
        self.closed = True


def test_collectives_of_several_workers_go_through_the_transport() -> None:
    t = _Recording()
    d = core.DistributedContext(
        rank=1, size=2, local_rank=1, local_size=2, cross_rank=0, cross_size=1, transport=t
    )
    assert d.allgather(1) == [1, 1]
    assert d.gather(2) is None
    assert d.broadcast_local(3) == "chief's"
    d.close()
    assert t.calls == [("allgather", 1, False), ("gather", 2, False), ("broadcast", 3, True)]
    assert t.closed
