"""Collectives over plain TCP: a relay thread in the chief's process, every rank its client.

Rank 0 runs a relay that listens on all interfaces of its node; every rank, rank 0 included
(over loopback), holds one connection to it. A collective is one request frame from each rank
of its scope and one reply frame back to each. The relay matches the calls of a scope (the
whole trial, or the ranks of one node) round by round, so the nodes' ``*_local`` collectives
proceed independently of each other and of the chief's main thread.

Frames are an 8-byte big-endian length and a body. The relay never unpickles what it relays:
requests carry pickled bytes that it forwards unchanged, and the handshake is JSON, so a stray
connection to the port cannot make the chief run code. Connections are made at the first
collective, not at construction, so building a context never blocks.

Failure semantics: a rank whose connection drops without saying goodbye (its process died)
breaks the transport, and every rank's pending and later collectives raise ``RuntimeError``
naming it. A rank that closed its context makes later collectives of its scopes raise. When
the chief's process dies, the other ranks' connections end and they raise too.
"""

from __future__ import annotations

import json
import pickle
import socket
import threading
import time
from typing import Any

from hpcdet.core._relay import Relay
from hpcdet.core._transport import Transport
from hpcdet.core._wire import (
    ALLGATHER,
    BROADCAST,
    BYE,
    GATHER,
    HELLO_LIMIT,
    HELLO_TIMEOUT,
    MAGIC,
    OK,
    OP_NAMES,
    recv_frame,
    send_frame,
    tune,
    unpack_blobs,
)

DEFAULT_PORT = 12360


class TcpTransport(Transport):
    """Collectives through a relay in the chief's process, over TCP (see the module docstring).

    Nothing happens at construction. At the first collective, rank 0 listens on ``port`` of
    all its interfaces and every rank connects to ``chief_ip:port``, retrying with backoff
    for up to ``connect_timeout`` seconds. Collectives then block until every rank of their
    scope has called; there is no time limit, since workers may legitimately compute for
    hours between collectives, but a peer that dies makes them raise at once.
    Call the collectives of one transport from one thread at a time.

    Args:
        rank, size, local_rank, local_size, cross_rank: This worker's place, as in
            :class:`~hpcdet.core.DistributedContext`.
        chief_ip: Address of rank 0's node, reachable from every node (rank 0 itself
            connects over loopback).
        port: The chief's port; ``0`` lets the system pick one (see :meth:`listen`).
        connect_timeout: Seconds to wait for the chief to answer (on workers) and for every
            worker to connect (on the chief).
        linger: On the chief, seconds :meth:`close` waits for the other workers to close.

    Raises (from the collectives):
        RuntimeError: The chief never answered, refused this worker, was lost, or reports
            that another worker died, closed, or called a different collective.
    """

    def __init__(
        self,
        *,
        rank: int,
        size: int,
        local_rank: int,
        local_size: int,
        cross_rank: int,
        chief_ip: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        connect_timeout: float = 300.0,
        linger: float = 30.0,
    ) -> None:
        self._rank = rank
        self._size = size
        self._local_rank = local_rank
        self._local_size = local_size
        self._cross_rank = cross_rank
        self._chief_ip = chief_ip
        self._port = port
        self._connect_timeout = connect_timeout
        self._linger = linger
        self._lock = threading.RLock()
        self._sock: socket.socket | None = None
        self._relay: Relay | None = None
        self._closed = False
        self._failure: str | None = None

    @property
    def address(self) -> str:
        """``chief_ip:port`` as the workers see it."""
        return f"{self._chief_ip}:{self._port}"

    def listen(self) -> int:
        """On rank 0, start the relay now (the first collective would) and return its port.

        Raises:
            RuntimeError: Not rank 0, or the port cannot be bound.
        """
        with self._lock:
            if self._rank != 0:
                raise RuntimeError(f"only rank 0 listens, not rank {self._rank}")
            if self._relay is not None:
                return self._port
            v6 = ":" in self._chief_ip
            listener = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET)
            # Lets a new trial bind while the previous one's connections are in TIME_WAIT.
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind(("::" if v6 else "0.0.0.0", self._port))
                listener.listen(max(self._size, 128))
            except OSError as e:
                listener.close()
                raise RuntimeError(
                    f"the chief (rank 0) cannot listen on port {self._port} for collectives: "
                    f"{e.strerror or e}. Another trial on this node may be using it; give "
                    "each trial its own port with INTER_TRAIN_PROCESS_COMM_PORT_1 or "
                    "port_offset"
                ) from e
            self._port = listener.getsockname()[1]
            self._relay = Relay(listener, self._size, self._connect_timeout)
            self._relay.start()
            return self._port

    def allgather(self, obj: Any, *, local: bool) -> list[Any]:
        """Every rank's ``obj`` in rank order, on every rank of the scope."""
        return [pickle.loads(b) for b in self._call(ALLGATHER, local, _dumps(obj))]

    def gather(self, obj: Any, *, local: bool) -> list[Any] | None:
        """Every rank's ``obj`` in rank order on the scope's chief; ``None`` elsewhere."""
        blobs = self._call(GATHER, local, _dumps(obj))
        return [pickle.loads(b) for b in blobs] if self._is_root(local) else None

    def broadcast(self, obj: Any, *, local: bool) -> Any:
        """The scope chief's ``obj`` on every rank; other ranks' objects are not sent."""
        payload = _dumps(obj) if self._is_root(local) else b""
        return pickle.loads(self._call(BROADCAST, local, payload)[0])

    def close(self) -> None:
        """Leave the trial's collectives; on the chief, stop the relay once the others left.

        Idempotent. Later collectives of this rank raise ``RuntimeError``.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._sock is not None:
                try:
                    send_frame(self._sock, bytes([BYE, 0]))
                except OSError:
                    pass
                self._sock.close()
                self._sock = None
            if self._relay is not None:
                self._relay.stop(self._linger)

    def _is_root(self, local: bool) -> bool:
        return (self._local_rank if local else self._rank) == 0

    def _call(self, op: int, local: bool, payload: bytes) -> list[memoryview]:
        name = OP_NAMES[op] + ("_local" if local else "")
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{name}() called after the DistributedContext was closed")
            if self._failure is not None:
                raise RuntimeError(self._failure)
            sock = self._connect()
            try:
                send_frame(sock, bytes([op, 1 if local else 0]), payload)
                reply = memoryview(recv_frame(sock))
            except (OSError, EOFError) as e:
                sock.close()
                self._sock = None
                self._failure = (
                    f"rank {self._rank} lost its connection to the chief (rank 0) at "
                    f"{self.address} during {name}(): {e or 'connection closed'}; the chief "
                    "process probably exited or crashed"
                )
                raise RuntimeError(self._failure) from e
        if reply[0] != OK:
            raise RuntimeError(f"{name}() failed on rank {self._rank}: {bytes(reply[1:]).decode()}")
        return unpack_blobs(reply[1:])

    def _connect(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        host = self._chief_ip
        if self._rank == 0:
            self.listen()
            host = "::1" if ":" in host else "127.0.0.1"
        hello = MAGIC + json.dumps(
            {
                "rank": self._rank, "size": self._size, "local_rank": self._local_rank,
                "local_size": self._local_size, "cross_rank": self._cross_rank,
            }
        ).encode()
        deadline = time.monotonic() + self._connect_timeout
        delay = 0.05
        while True:
            remaining = deadline - time.monotonic()
            try:
                sock = socket.create_connection(
                    (host, self._port), timeout=max(0.1, min(HELLO_TIMEOUT, remaining))
                )
            except OSError as e:
                error: BaseException = e
            else:
                try:
                    tune(sock)
                    send_frame(sock, hello)
                    answer = recv_frame(sock, HELLO_LIMIT)
                except (OSError, EOFError, ValueError) as e:
                    sock.close()
                    error = e
                else:
                    if answer[:1] != bytes([OK]):
                        sock.close()
                        raise RuntimeError(
                            f"the chief at {self.address} refused rank {self._rank}: "
                            f"{bytes(answer[1:]).decode(errors='replace')}"
                        )
                    sock.settimeout(None)
                    self._sock = sock
                    return sock
            if time.monotonic() + delay > deadline:
                raise RuntimeError(
                    f"rank {self._rank} could not reach the chief (rank 0) at {self.address} "
                    f"within {self._connect_timeout:g} s: {error}. Check that rank 0 runs and "
                    "that chief_ip is an address of its node that this node can reach"
                ) from error
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def _dumps(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
