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
import logging
import pickle
import selectors
import socket
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hpcdet.core._transport import Transport

logger = logging.getLogger("hpcdet.core")

DEFAULT_PORT = 12360

_LEN = struct.Struct("!Q")
_COUNT = struct.Struct("!I")
_MAGIC = b"hpcdet-collectives-1\n"
_HELLO_LIMIT = 64 * 1024

_ALLGATHER, _GATHER, _BROADCAST, _BYE = 1, 2, 3, 4
_OP_NAMES = {_ALLGATHER: "allgather", _GATHER: "gather", _BROADCAST: "broadcast"}
_OK, _ERR = 0, 1
_GLOBAL = -1  # scope key of trial-wide rounds; node rounds use the node's cross_rank

# The relay reads a frame once the socket is readable; a peer that stalls mid-frame for this
# long is treated as lost rather than blocking the relay forever.
_IO_TIMEOUT = 120.0
_HELLO_TIMEOUT = 10.0


def _tune(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # Keepalive notices a node that vanished without closing its connections (~90 s).
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 6)):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


def _send_frame(sock: socket.socket, *parts: bytes) -> None:
    size = sum(len(p) for p in parts)
    sock.sendall(b"".join((_LEN.pack(size), *parts)))


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], min(n - got, 1 << 20))
        if k == 0:
            raise EOFError("connection closed")
        got += k
    return buf


def _recv_frame(sock: socket.socket, limit: int | None = None) -> bytearray:
    (size,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    if limit is not None and size > limit:
        raise ValueError(f"frame of {size} bytes exceeds {limit}")
    return _recv_exact(sock, size)


def _pack_blobs(blobs: Sequence[bytes | memoryview]) -> bytes:
    parts: list[bytes | memoryview] = [_COUNT.pack(len(blobs))]
    for blob in blobs:
        parts += [_LEN.pack(len(blob)), blob]
    return b"".join(parts)


def _unpack_blobs(data: memoryview) -> list[memoryview]:
    (count,) = _COUNT.unpack_from(data, 0)
    pos = _COUNT.size
    blobs = []
    for _ in range(count):
        (size,) = _LEN.unpack_from(data, pos)
        pos += _LEN.size
        blobs.append(data[pos : pos + size])
        pos += size
    return blobs


class _Refused(Exception):
    """A handshake the relay turns down, with the reason the client will show."""


@dataclass
class _Member:
    sock: socket.socket
    rank: int
    local_rank: int
    local_size: int
    cross_rank: int


class _Relay:
    """The chief's relay thread; see the module docstring for what it guarantees."""

    def __init__(self, listener: socket.socket, size: int, connect_timeout: float) -> None:
        self._listener = listener
        self._port: int = listener.getsockname()[1]
        self._size = size
        self._connect_timeout = connect_timeout
        self._connect_deadline = time.monotonic() + connect_timeout
        self._sel = selectors.DefaultSelector()
        self._members: dict[int, _Member] = {}
        self._closed: dict[int, int] = {}  # rank -> cross_rank of ranks that said goodbye
        self._rounds: dict[int, dict[int, tuple[int, memoryview]]] = {}
        self._broken: str | None = None
        self._stop = threading.Event()
        self._stop_by = 0.0
        self._thread = threading.Thread(target=self._run, name="hpcdet-collectives", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, linger: float) -> None:
        """Serve the other ranks for up to ``linger`` s until they all leave, then stop."""
        self._stop_by = time.monotonic() + linger
        self._stop.set()
        self._thread.join(linger + 5)

    def _run(self) -> None:
        try:
            self._sel.register(self._listener, selectors.EVENT_READ)
            while not (
                self._stop.is_set()
                and (not self._members or time.monotonic() >= self._stop_by)
            ):
                for key, _ in self._sel.select(timeout=0.1):
                    if key.fileobj is self._listener:
                        self._accept()
                    elif key.data is None:
                        self._hello(key.fileobj)  # type: ignore[arg-type]
                    else:
                        self._request(key.data)
                self._check_connect_deadline()
        except Exception as e:
            logger.exception("the chief's collectives relay failed")
            self._break(f"the chief's collectives relay failed: {e!r}")
        finally:
            for key in list(self._sel.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]
            self._sel.close()

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
            _tune(conn)
        except OSError as e:
            logger.warning("accepting a connection for collectives failed: %s", e)
            return
        conn.settimeout(_HELLO_TIMEOUT)
        self._sel.register(conn, selectors.EVENT_READ, None)

    def _hello(self, sock: socket.socket) -> None:
        self._sel.unregister(sock)
        try:
            member = self._admit(sock, _recv_frame(sock, _HELLO_LIMIT))
            _send_frame(sock, bytes([_OK]))
        except _Refused as e:
            logger.warning("refused a worker's connection: %s", e)
            try:
                _send_frame(sock, bytes([_ERR]), str(e).encode())
            except OSError:
                pass
            sock.close()
            return
        except (OSError, EOFError, ValueError, KeyError, TypeError) as e:
            logger.warning("dropped a connection that is not an hpcdet worker: %s", e)
            sock.close()
            return
        sock.settimeout(_IO_TIMEOUT)
        self._members[member.rank] = member
        self._sel.register(sock, selectors.EVENT_READ, member)

    def _admit(self, sock: socket.socket, body: bytearray) -> _Member:
        if not body.startswith(_MAGIC):
            raise ValueError("bad handshake")
        hello = json.loads(body[len(_MAGIC) :])
        rank, size = int(hello["rank"]), int(hello["size"])
        local_rank, local_size = int(hello["local_rank"]), int(hello["local_size"])
        cross_rank = int(hello["cross_rank"])
        if self._broken is not None:
            raise _Refused(self._broken)
        if size != self._size:
            raise _Refused(
                f"rank {rank} says the trial has {size} workers but the chief says {self._size}"
            )
        if not 0 <= rank < size:
            raise _Refused(f"rank {rank} is outside [0, {size})")
        if rank in self._members or rank in self._closed:
            raise _Refused(
                f"rank {rank} already joined this chief: two workers have the same rank, or "
                "another trial uses the same port (give each trial its own port with "
                "INTER_TRAIN_PROCESS_COMM_PORT_1 or port_offset)"
            )
        for m in self._members.values():
            if m.cross_rank == cross_rank and (
                m.local_size != local_size or m.local_rank == local_rank
            ):
                raise _Refused(
                    f"rank {rank} (local_rank={local_rank}, local_size={local_size}) does not "
                    f"fit node {cross_rank}, where rank {m.rank} has local_rank={m.local_rank}, "
                    f"local_size={m.local_size}"
                )
        return _Member(sock, rank, local_rank, local_size, cross_rank)

    def _check_connect_deadline(self) -> None:
        joined = len(self._members) + len(self._closed)
        if self._broken is None and joined < self._size and (
            time.monotonic() > self._connect_deadline
        ):
            missing = sorted(set(range(self._size)) - set(self._members) - set(self._closed))
            self._break(
                f"rank(s) {missing} did not connect to the chief on port {self._port} within "
                f"{self._connect_timeout:g} s"
            )

    def _request(self, member: _Member) -> None:
        try:
            body = memoryview(_recv_frame(member.sock))
            if len(body) < 2:
                raise EOFError("malformed request")
        except (OSError, EOFError) as e:
            self._lost(member, e)
            return
        op, scope = body[0], (member.cross_rank if body[1] else _GLOBAL)
        if op == _BYE:
            self._goodbye(member)
            return
        problem = self._broken or self._closed_in(scope)
        if problem is not None:
            self._reply(member, bytes([_ERR]) + problem.encode())
            return
        round_ = self._rounds.setdefault(scope, {})
        round_[member.rank] = (op, body[2:])
        expected = self._size if scope == _GLOBAL else member.local_size
        if len(round_) == expected:
            self._finish(scope)

    def _closed_in(self, scope: int) -> str | None:
        gone = sorted(r for r, node in self._closed.items() if scope in (_GLOBAL, node))
        if not gone:
            return None
        where = "the trial" if scope == _GLOBAL else f"node {scope}"
        return (
            f"rank {gone[0]} already closed its DistributedContext, so collectives among "
            f"{where} cannot complete"
        )

    def _finish(self, scope: int) -> None:
        round_ = self._rounds.pop(scope)
        members = sorted(
            (self._members[r] for r in round_),
            key=lambda m: m.rank if scope == _GLOBAL else m.local_rank,
        )
        ops = [round_[m.rank][0] for m in members]
        if len(set(ops)) > 1:
            calls = ", ".join(
                f"rank {m.rank} called {_OP_NAMES.get(op, op)}" for m, op in zip(members, ops)
            )
            where = "the trial" if scope == _GLOBAL else f"node {scope}"
            message = (
                f"collective mismatch among {where}: {calls}; every worker must call the same "
                "collectives in the same order"
            ).encode()
            for m in members:
                self._reply(m, bytes([_ERR]) + message)
            return
        blobs = [round_[m.rank][1] for m in members]
        everyone = bytes([_OK]) + _pack_blobs(blobs[:1] if ops[0] == _BROADCAST else blobs)
        nothing = bytes([_OK]) + _pack_blobs([])
        # The scope chief last: rank 0 lives in this process, and if it went on and exited
        # before the others had their replies, they would never get them.
        for i, m in reversed(list(enumerate(members))):
            self._reply(m, nothing if ops[0] == _GATHER and i > 0 else everyone)

    def _reply(self, member: _Member, body: bytes) -> None:
        if member.rank not in self._members:
            return
        try:
            _send_frame(member.sock, body)
        except OSError as e:
            self._lost(member, e)

    def _drop(self, member: _Member) -> None:
        del self._members[member.rank]
        self._sel.unregister(member.sock)
        member.sock.close()

    def _goodbye(self, member: _Member) -> None:
        self._drop(member)
        self._closed[member.rank] = member.cross_rank
        for scope in (_GLOBAL, member.cross_rank):
            waiting = self._rounds.pop(scope, {})
            problem = self._closed_in(scope) or ""
            for rank in waiting:
                if rank in self._members:
                    self._reply(self._members[rank], bytes([_ERR]) + problem.encode())

    def _lost(self, member: _Member, error: BaseException) -> None:
        if member.rank not in self._members:
            return
        self._drop(member)
        self._break(
            f"rank {member.rank} (node {member.cross_rank}) lost its connection to the chief "
            f"({error or 'connection closed'}); its process probably died"
        )

    def _break(self, reason: str) -> None:
        if self._broken is None:
            self._broken = reason
            logger.error("collectives among the trial's workers failed: %s", reason)
        waiting = [r for round_ in self._rounds.values() for r in round_]
        self._rounds.clear()
        message = bytes([_ERR]) + self._broken.encode()
        for rank in waiting:
            if rank in self._members:
                self._reply(self._members[rank], message)


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
        self._relay: _Relay | None = None
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
            self._relay = _Relay(listener, self._size, self._connect_timeout)
            self._relay.start()
            return self._port

    def allgather(self, obj: Any, *, local: bool) -> list[Any]:
        """Every rank's ``obj`` in rank order, on every rank of the scope."""
        return [pickle.loads(b) for b in self._call(_ALLGATHER, local, _dumps(obj))]

    def gather(self, obj: Any, *, local: bool) -> list[Any] | None:
        """Every rank's ``obj`` in rank order on the scope's chief; ``None`` elsewhere."""
        blobs = self._call(_GATHER, local, _dumps(obj))
        return [pickle.loads(b) for b in blobs] if self._is_root(local) else None

    def broadcast(self, obj: Any, *, local: bool) -> Any:
        """The scope chief's ``obj`` on every rank; other ranks' objects are not sent."""
        payload = _dumps(obj) if self._is_root(local) else b""
        return pickle.loads(self._call(_BROADCAST, local, payload)[0])

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
                    _send_frame(self._sock, bytes([_BYE, 0]))
                except OSError:
                    pass
                self._sock.close()
                self._sock = None
            if self._relay is not None:
                self._relay.stop(self._linger)

    def _is_root(self, local: bool) -> bool:
        return (self._local_rank if local else self._rank) == 0

    def _call(self, op: int, local: bool, payload: bytes) -> list[memoryview]:
        name = _OP_NAMES[op] + ("_local" if local else "")
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{name}() called after the DistributedContext was closed")
            if self._failure is not None:
                raise RuntimeError(self._failure)
            sock = self._connect()
            try:
                _send_frame(sock, bytes([op, 1 if local else 0]), payload)
                reply = memoryview(_recv_frame(sock))
            except (OSError, EOFError) as e:
                sock.close()
                self._sock = None
                self._failure = (
                    f"rank {self._rank} lost its connection to the chief (rank 0) at "
                    f"{self.address} during {name}(): {e or 'connection closed'}; the chief "
                    "process probably exited or crashed"
                )
                raise RuntimeError(self._failure) from e
        if reply[0] != _OK:
            raise RuntimeError(f"{name}() failed on rank {self._rank}: {bytes(reply[1:]).decode()}")
        return _unpack_blobs(reply[1:])

    def _connect(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        host = self._chief_ip
        if self._rank == 0:
            self.listen()
            host = "::1" if ":" in host else "127.0.0.1"
        hello = _MAGIC + json.dumps(
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
                    (host, self._port), timeout=max(0.1, min(_HELLO_TIMEOUT, remaining))
                )
            except OSError as e:
                error: BaseException = e
            else:
                try:
                    _tune(sock)
                    _send_frame(sock, hello)
                    answer = _recv_frame(sock, _HELLO_LIMIT)
                except (OSError, EOFError, ValueError) as e:
                    sock.close()
                    error = e
                else:
                    if answer[:1] != bytes([_OK]):
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
