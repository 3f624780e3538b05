"""Who this worker is among the trial's processes, and how they exchange small objects.

Collectives short-circuit when there is nothing to exchange (``size == 1`` or, for the
``*_local`` variants, ``local_size == 1``). Everything else goes through a :class:`Transport`:
TCP through the chief (:class:`~hpcdet.core._tcp.TcpTransport`) unless another is given, e.g.
MPI (:class:`~hpcdet.core._mpi.MpiTransport`, which :meth:`DistributedContext.from_mpi4py`
and, for MPI ranks, :meth:`DistributedContext.from_slurm` use).
"""

from __future__ import annotations

import importlib.util
import os
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hpcdet.core._mpi import MpiTransport
from hpcdet.core._slurm_env import first_hostname, is_mpi_process, slurm_layout
from hpcdet.core._tcp import DEFAULT_PORT, TcpTransport
from hpcdet.core._transport import Transport

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["DistributedContext", "DummyDistributedContext", "Transport"]

_PORT_ENV = "INTER_TRAIN_PROCESS_COMM_PORT_1"
_PULL_PORT_ENV = "INTER_TRAIN_PROCESS_COMM_PORT_2"


class DistributedContext:
    """The layout of a trial's worker processes and collectives among them.

    Building one never blocks; with the default TCP transport the workers meet at their
    first collective. Collectives must then be called in the same order by every worker of
    their scope (all workers, or the workers of one node for the ``*_local`` variants).

    Args:
        rank: This worker's rank among all ``size`` workers; rank 0 is the chief.
        size: Number of workers in the trial.
        local_rank: This worker's rank on its node.
        local_size: Number of workers on this node.
        cross_rank: This node's rank among the trial's nodes.
        cross_size: Number of nodes.
        chief_ip: Address of the chief's node, reachable from every node; required when
            the workers span several nodes and no ``transport`` is given. Defaults to
            127.0.0.1 (one node).
        pub_port: The chief's TCP port; by default ``INTER_TRAIN_PROCESS_COMM_PORT_1`` from
            the environment, else 12360.
        port_offset: Added to ``pub_port`` (and ``pull_port``); give concurrent trials on
            one node different offsets.
        pull_port, force_tcp: Accepted for Determined compatibility; unused.
        transport: Carries the collectives when ``size > 1``; by default a
            :class:`~hpcdet.core._tcp.TcpTransport` to ``chief_ip:pub_port + port_offset``.

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
        pub_port: int | None = None,
        pull_port: int | None = None,
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
        if local_size != size and chief_ip is None and transport is None:
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
        if pub_port is None:
            pub_port = _env_port(_PORT_ENV, DEFAULT_PORT)
        if pull_port is None:
            pull_port = _env_port(_PULL_PORT_ENV, pub_port + 16)
        self._pub_port = pub_port + port_offset
        self._pull_port = pull_port + port_offset
        self._force_tcp = force_tcp
        if transport is None and size > 1:
            transport = TcpTransport(
                rank=rank, size=size, local_rank=local_rank, local_size=local_size,
                cross_rank=cross_rank, chief_ip=self._chief_ip, port=self._pub_port,
            )
        self._transport = transport or Transport()

    @classmethod
    def from_mpi4py(cls, comm: MPI.Comm | None = None) -> DistributedContext:
        """Build from an MPI communicator; collectives become MPI calls on it.

        Collective over ``comm`` (default ``MPI.COMM_WORLD``). Rank and size are the
        communicator's; a node is the set of ranks that share memory
        (``MPI.COMM_TYPE_SHARED``), local ranks follow global rank order, and nodes are
        numbered in the order of their lowest rank.

        Raises:
            ImportError: mpi4py is not installed (``pip install 'hpcdet[mpi]'``).
        """
        transport = MpiTransport(comm)
        world, node = transport.comm, transport.local_comm
        rank = world.Get_rank()
        leader = node.bcast(rank, root=0)
        leaders = sorted(set(world.allgather(leader)))
        return cls(
            rank=rank, size=world.Get_size(), local_rank=node.Get_rank(),
            local_size=node.Get_size(), cross_rank=leaders.index(leader),
            cross_size=len(leaders), transport=transport,
        )

    @classmethod
    def from_slurm(
        cls, env: Mapping[str, str] | None = None, chief_ip: str | None = None
    ) -> DistributedContext:
        """Build from the variables ``srun`` sets for each task of a job step.

        Reads ``SLURM_PROCID``, ``SLURM_STEP_NUM_TASKS`` (or ``SLURM_NTASKS``),
        ``SLURM_LOCALID``, ``SLURM_NODEID``, ``SLURM_STEP_NUM_NODES`` (or ``SLURM_NNODES``)
        and the step's tasks per node (``SLURM_STEP_TASKS_PER_NODE``,
        ``SLURM_TASKS_PER_NODE`` or ``SLURM_NTASKS_PER_NODE``) from ``env`` (default
        ``os.environ``).

        If the task is an MPI rank (``PMI_RANK``, ``PMIX_RANK`` or ``OMPI_COMM_WORLD_RANK``
        is set, e.g. by ``srun --mpi=pmi2``) and mpi4py is installed, collectives use MPI
        (``MPI.COMM_WORLD``, which must agree with Slurm's ranks; building is then
        collective). Otherwise they use TCP to ``chief_ip``, else ``DET_CHIEF_IP``, else the
        address of the step's first node (where ``srun`` places task 0 with its block and
        cyclic distributions). Without ``INTER_TRAIN_PROCESS_COMM_PORT_1`` in ``env``, the
        port is 12360 plus an offset in [0, 1000) derived from the job and step ids, so that
        trials sharing a node rarely collide.

        Raises:
            ValueError: A variable is missing or malformed, MPI and Slurm disagree on the
                ranks, or the first node's name does not resolve.
        """
        env = os.environ if env is None else env
        lay = slurm_layout(env)

        def build(**kw: Any) -> DistributedContext:
            return cls(
                rank=lay.rank, size=lay.size, local_rank=lay.local_rank,
                local_size=lay.local_size, cross_rank=lay.cross_rank,
                cross_size=lay.cross_size, **kw,
            )

        if lay.size > 1 and is_mpi_process(env) and importlib.util.find_spec("mpi4py"):
            transport = MpiTransport(cross_rank=lay.cross_rank, local_rank=lay.local_rank)
            mpi_layout = (transport.comm.Get_rank(), transport.comm.Get_size())
            if mpi_layout != (lay.rank, lay.size):
                transport.close()
                raise ValueError(
                    f"MPI says this is rank {mpi_layout[0]} of {mpi_layout[1]} but Slurm says "
                    f"rank {lay.rank} of {lay.size}; start one MPI process per Slurm task, "
                    "e.g. with srun --mpi=pmi2"
                )
            return build(chief_ip=chief_ip, transport=transport)
        chief_ip = chief_ip or env.get("DET_CHIEF_IP")
        if chief_ip is None and lay.cross_size > 1:
            host = first_hostname(lay.nodelist)
            try:
                chief_ip = socket.gethostbyname(host)
            except OSError as e:
                raise ValueError(
                    f"cannot resolve {host!r}, the first node of {lay.nodelist!r}, to find the "
                    "chief; pass chief_ip= or set DET_CHIEF_IP"
                ) from e
        offset = 0 if env.get(_PORT_ENV) else lay.port_offset()
        return build(
            chief_ip=chief_ip, pub_port=_env_port(_PORT_ENV, DEFAULT_PORT, env),
            port_offset=offset,
        )

    @classmethod
    def from_torch_distributed(
        cls, chief_ip: str | None = None, *, env: Mapping[str, str] | None = None
    ) -> DistributedContext:
        """Build from the variables ``torch.distributed.run`` sets.

        Reads ``RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE``
        and, when ``chief_ip`` is not given, ``DET_CHIEF_IP`` from ``env`` (default
        ``os.environ``); the port comes from ``INTER_TRAIN_PROCESS_COMM_PORT_1`` there.
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
            pub_port=_env_port(_PORT_ENV, DEFAULT_PORT, env),
        )

    @classmethod
    def from_deepspeed(
        cls, chief_ip: str | None = None, *, env: Mapping[str, str] | None = None
    ) -> DistributedContext:
        """Build from the variables the DeepSpeed launcher sets.

        Reads ``RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_SIZE, CROSS_RANK, CROSS_SIZE`` and, when
        ``chief_ip`` is not given, ``DET_CHIEF_IP`` from ``env`` (default ``os.environ``);
        the port comes from ``INTER_TRAIN_PROCESS_COMM_PORT_1`` there.
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
            pub_port=_env_port(_PORT_ENV, DEFAULT_PORT, env),
        )

    @classmethod
    def from_horovod(
        cls, hvd: Any, chief_ip: str | None = None, *, env: Mapping[str, str] | None = None
    ) -> DistributedContext:
        """Build from an initialised ``horovod`` module (``hvd.rank()``, ``hvd.size()``, ...).

        ``chief_ip`` falls back to ``DET_CHIEF_IP`` in ``env`` (default ``os.environ``), the
        port to ``INTER_TRAIN_PROCESS_COMM_PORT_1`` there.
        """
        env = os.environ if env is None else env
        return cls(
            rank=hvd.rank(), size=hvd.size(), local_rank=hvd.local_rank(),
            local_size=hvd.local_size(), cross_rank=hvd.cross_rank(),
            cross_size=hvd.cross_size(), chief_ip=chief_ip or env.get("DET_CHIEF_IP"),
            pub_port=_env_port(_PORT_ENV, DEFAULT_PORT, env),
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


def _env_port(name: str, default: int, env: Mapping[str, str] | None = None) -> int:
    value = (os.environ if env is None else env).get(name)
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a port number") from None
