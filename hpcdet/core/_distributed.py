"""Who this worker is among the trial's processes, and how they exchange small objects.

Collectives short-circuit when there is nothing to exchange (``size == 1`` or, for the
``*_local`` variants, ``local_size == 1``). Everything else goes through a :class:`Transport`;
the default one refuses, until distributed training support provides a real one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

# Determined's defaults; accepted for compatibility, unused until a transport needs ports.
_PUB_PORT = 12360
_PULL_PORT = _PUB_PORT + 16

_NO_TRANSPORT = "multi-process collectives arrive with distributed training support"


class Transport:
    """Moves picklable objects between the ranks of one trial.

    Every method is collective: all ranks of the scope (the whole trial, or this node when
    ``local`` is true) call it in the same order; results are in rank order. This base class
    is the transport of a context without one: every collective raises
    ``NotImplementedError``. Real transports override all three collectives.
    """

    def allgather(self, obj: Any, *, local: bool) -> list[Any]:
        """Every rank's ``obj``, on every rank."""
        raise NotImplementedError(_NO_TRANSPORT)

    def gather(self, obj: Any, *, local: bool) -> list[Any] | None:
        """Every rank's ``obj`` on the scope's chief; ``None`` elsewhere."""
        raise NotImplementedError(_NO_TRANSPORT)

    def broadcast(self, obj: Any, *, local: bool) -> Any:
        """The scope chief's ``obj``, on every rank."""
        raise NotImplementedError(_NO_TRANSPORT)

    def close(self) -> None:
        """Release sockets or threads; called once by :meth:`DistributedContext.close`."""


class DistributedContext:
    """The layout of a trial's worker processes and collectives among them.

    Args:
        rank: This worker's rank among all ``size`` workers; rank 0 is the chief.
        size: Number of workers in the trial.
        local_rank: This worker's rank on its node.
        local_size: Number of workers on this node.
        cross_rank: This node's rank among the trial's nodes.
        cross_size: Number of nodes.
        chief_ip: Address of the chief's node; required when workers span several nodes.
        pub_port, pull_port, port_offset, force_tcp: Accepted for Determined compatibility.
        transport: Carries collectives when ``size > 1``; without one they raise
            ``NotImplementedError``.

    Raises:
        ValueError: A rank is outside its size, or ``chief_ip`` is missing for multi-node.
    """

    def __init__(
        self,
        *,
        rank: int,
        size: int,
        local_rank: int,
        local_size: int,
        cross_rank: int,
        cross_size: int,
        chief_ip: str | None = None,
        pub_port: int = _PUB_PORT,
        pull_port: int = _PULL_PORT,
        port_offset: int = 0,
        force_tcp: bool = False,
        transport: Transport | None = None,
    ) -> None:
        for name, r, n in (
            ("rank", rank, size),
            ("local_rank", local_rank, local_size),
            ("cross_rank", cross_rank, cross_size),
        ):
            if not 0 <= r < n:
                raise ValueError(f"{name}={r} must be in [0, {n}) for the given sizes")
        if local_size > size:
            raise ValueError(f"local_size={local_size} cannot exceed size={size}")
        if local_size != size and chief_ip is None:
            raise ValueError(
                f"the workers span several nodes (size={size}, local_size={local_size}) but "
                "chief_ip was not given. When cross_size > 1, the chief_ip parameter is required."
            )
        self.rank = rank
        self.size = size
        self.local_rank = local_rank
        self.local_size = local_size
        self.cross_rank = cross_rank
        self.cross_size = cross_size
        self._chief_ip = chief_ip or "127.0.0.1"
        self._pub_port = pub_port + port_offset
        self._pull_port = pull_port + port_offset
        self._force_tcp = force_tcp
        self._transport = transport or Transport()

    @classmethod
    def from_torch_distributed(
        cls, chief_ip: str | None = None, *, env: Mapping[str, str] | None = None
    ) -> DistributedContext:
        """Build from the variables ``torch.distributed.run`` sets.

        Reads ``RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE``
        and, when ``chief_ip`` is not given, ``DET_CHIEF_IP`` from ``env`` (default
        ``os.environ``).
        """
        env = os.environ if env is None else env
        r, s, lr, ls, cr, cs = _read_ints(
            env,
            ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
             "GROUP_WORLD_SIZE"),
            "from_torch_distributed", "torch.distributed.run",
        )
        return cls(
            rank=r, size=s, local_rank=lr, local_size=ls, cross_rank=cr, cross_size=cs,
            chief_ip=chief_ip or env.get("DET_CHIEF_IP"),
        )

    @classmethod
    def from_deepspeed(
        cls, chief_ip: str | None = None, *, env: Mapping[str, str] | None = None
    ) -> DistributedContext:
        """Build from the variables the DeepSpeed launcher sets.

        Reads ``RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_SIZE, CROSS_RANK, CROSS_SIZE`` and, when
        ``chief_ip`` is not given, ``DET_CHIEF_IP`` from ``env`` (default ``os.environ``).
        """
        env = os.environ if env is None else env
        r, s, lr, ls, cr, cs = _read_ints(
            env,
            ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE"),
            "from_deepspeed", "the deepspeed launcher",
        )
        return cls(
            rank=r, size=s, local_rank=lr, local_size=ls, cross_rank=cr, cross_size=cs,
            chief_ip=chief_ip or env.get("DET_CHIEF_IP"),
        )

    @classmethod
    def from_horovod(
        cls, hvd: Any, chief_ip: str | None = None, *, env: Mapping[str, str] | None = None
    ) -> DistributedContext:
        """Build from an initialised ``horovod`` module (``hvd.rank()``, ``hvd.size()``, ...).

        ``chief_ip`` falls back to ``DET_CHIEF_IP`` in ``env`` (default ``os.environ``).
        """
        env = os.environ if env is None else env
        return cls(
            rank=hvd.rank(), size=hvd.size(), local_rank=hvd.local_rank(),
            local_size=hvd.local_size(), cross_rank=hvd.cross_rank(),
            cross_size=hvd.cross_size(), chief_ip=chief_ip or env.get("DET_CHIEF_IP"),
        )

    def get_rank(self) -> int:
        """This worker's rank in the trial (0 is the chief)."""
        return self.rank

    def get_local_rank(self) -> int:
        """This worker's rank on its node."""
        return self.local_rank

    def get_size(self) -> int:
        """Number of workers in the trial."""
        return self.size

    def get_local_size(self) -> int:
        """Number of workers on this node."""
        return self.local_size

    def get_cross_rank(self) -> int:
        """This node's rank among the trial's nodes."""
        return self.cross_rank

    def get_cross_size(self) -> int:
        """Number of nodes."""
        return self.cross_size

    def get_num_agents(self) -> int:
        """Number of nodes (Determined's name for ``cross_size``)."""
        return self.cross_size

    def allgather(self, stuff: Any) -> list[Any]:
        """Every worker's ``stuff`` in rank order, on every worker (collective)."""
        if self.size < 2:
            return [stuff]
        return self._transport.allgather(stuff, local=False)

    def gather(self, stuff: Any) -> list[Any] | None:
        """Every worker's ``stuff`` in rank order on the chief, ``None`` elsewhere (collective)."""
        if self.size < 2:
            return [stuff]
        return self._transport.gather(stuff, local=False)

    def broadcast(self, stuff: Any) -> Any:
        """The chief's ``stuff`` on every worker; other workers' values are ignored."""
        if self.size < 2:
            return stuff
        return self._transport.broadcast(stuff, local=False)

    def allgather_local(self, stuff: Any) -> list[Any]:
        """Like :meth:`allgather` among the workers of this node."""
        if self.local_size < 2:
            return [stuff]
        return self._transport.allgather(stuff, local=True)

    def gather_local(self, stuff: Any) -> list[Any] | None:
        """Like :meth:`gather` among the workers of this node (result on local rank 0)."""
        if self.local_size < 2:
            return [stuff]
        return self._transport.gather(stuff, local=True)

    def broadcast_local(self, stuff: Any = None) -> Any:
        """Like :meth:`broadcast` from local rank 0 to the workers of this node."""
        if self.local_size < 2:
            return stuff
        return self._transport.broadcast(stuff, local=True)

    def close(self) -> None:
        """Release the transport; the context must not be used afterwards."""
        self._transport.close()


class DummyDistributedContext(DistributedContext):
    """The layout of a single-process trial: rank 0 of 1 on 1 node."""

    def __init__(self) -> None:
        super().__init__(
            rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1
        )


def _read_ints(
    env: Mapping[str, str], names: tuple[str, ...], who: str, launcher: str
) -> list[int]:
    missing = [n for n in names if n not in env]
    if missing:
        raise ValueError(
            f"{who}() needs {', '.join(missing)} in the environment; run the script under "
            f"{launcher}, which sets them"
        )
    values = []
    for n in names:
        try:
            values.append(int(env[n]))
        except ValueError:
            raise ValueError(f"{n}={env[n]!r} is not an integer") from None
    return values
