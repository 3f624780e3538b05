"""Collectives over an MPI communicator (mpi4py), for workers started as MPI ranks.

mpi4py is optional (``pip install 'hpcdet[mpi]'``) and imported only when an
:class:`MpiTransport` is built. On Slurm, start the ranks with ``srun --mpi=pmi2``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpcdet.core._transport import Transport

if TYPE_CHECKING:
    from mpi4py import MPI

_INSTALL_HINT = "pip install 'hpcdet[mpi]'"


def import_mpi() -> Any:
    """The ``mpi4py.MPI`` module (importing it initialises MPI).

    Raises:
        ImportError: mpi4py is missing or finds no MPI library; the message says what to install.
    """
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(
            f"MPI collectives need mpi4py and an MPI library: {_INSTALL_HINT} (installs mpi4py "
            f"and MPICH), or use the TCP transport ({e})"
        ) from e
    except RuntimeError as e:  # mpi4py raises this when it cannot load the MPI library
        raise ImportError(
            f"mpi4py could not load an MPI library: {e}. Install one, e.g. {_INSTALL_HINT}"
        ) from e
    return MPI


class MpiTransport(Transport):
    """Collectives as MPI calls on ``comm`` and on a per-node sub-communicator.

    Building one is collective over ``comm`` (it splits off the node communicator). Objects
    are pickled by mpi4py. Scope chiefs are ``comm`` rank 0 and node-communicator rank 0.

    Args:
        comm: The trial's communicator; ``MPI.COMM_WORLD`` by default.
        cross_rank: This rank's node number. Given, the node communicator groups the ranks
            with the same ``cross_rank``, ordered by ``local_rank`` (or by rank); omitted, it
            groups the ranks that share memory (``MPI.COMM_TYPE_SHARED``), ordered by rank.
        local_rank: Orders the ranks of a node when ``cross_rank`` is given.

    Raises:
        ImportError: mpi4py is not installed.
    """

    def __init__(
        self,
        comm: MPI.Comm | None = None,
        *,
        cross_rank: int | None = None,
        local_rank: int | None = None,
    ) -> None:
        mpi = self._mpi = import_mpi()
        self._freed = False
        self.comm: MPI.Comm = mpi.COMM_WORLD if comm is None else comm
        rank = self.comm.Get_rank()
        if cross_rank is None:
            self.local_comm: MPI.Comm = self.comm.Split_type(
                mpi.COMM_TYPE_SHARED, key=rank
            )
        else:
            key = rank if local_rank is None else local_rank
            self.local_comm = self.comm.Split(color=cross_rank, key=key)

    def _comm(self, local: bool) -> MPI.Comm:
        return self.local_comm if local else self.comm

    def allgather(self, obj: Any, *, local: bool) -> list[Any]:
        """Every rank's ``obj`` in rank order, on every rank of the scope."""
        return self._comm(local).allgather(obj)

    def gather(self, obj: Any, *, local: bool) -> list[Any] | None:
        """Every rank's ``obj`` in rank order on the scope's chief; ``None`` elsewhere."""
        return self._comm(local).gather(obj, root=0)

    def broadcast(self, obj: Any, *, local: bool) -> Any:
        """The scope chief's ``obj`` on every rank."""
        return self._comm(local).bcast(obj, root=0)

    def close(self) -> None:
        """Free the node communicator (``comm`` belongs to the caller and stays usable)."""
        if not self._freed and not self._mpi.Is_finalized():
            self.local_comm.Free()
        self._freed = True
