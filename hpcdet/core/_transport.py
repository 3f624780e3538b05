"""The interface between :class:`~hpcdet.core.DistributedContext` and whatever carries its data.

Implementations: :class:`~hpcdet.core._tcp.TcpTransport` (the default for several workers) and
:class:`~hpcdet.core._mpi.MpiTransport` (over an mpi4py communicator).
"""

from __future__ import annotations

from typing import Any

_NO_TRANSPORT = (
    "this DistributedContext has no transport for its collectives; pass "
    "transport=TcpTransport(...) or MpiTransport(...), or leave transport unset to get TCP"
)


class Transport:
    """Moves picklable objects between the ranks of one trial.

    Every method is collective: all ranks of the scope (the whole trial, or this node when
    ``local`` is true) call it in the same order; results are in rank order (local rank order
    for the node scope). The scope's chief is rank 0, or local rank 0 for the node scope.
    This base class carries nothing: every collective raises ``NotImplementedError``. Real
    transports override all three collectives.
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
