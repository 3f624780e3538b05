"""The relay in the chief's process that matches the collectives of every rank
(see ``hpcdet.core._tcp`` for what it guarantees)."""

from __future__ import annotations

import json
import logging
import selectors
import socket
import threading
import time
from dataclasses import dataclass

from hpcdet.core._wire import (
    BROADCAST,
    BYE,
    ERR,
    GATHER,
    GLOBAL,
    HELLO_LIMIT,
    HELLO_TIMEOUT,
    IO_TIMEOUT,
    MAGIC,
    OK,
    OP_NAMES,
    pack_blobs,
    recv_frame,
    send_frame,
    tune,
)

logger = logging.getLogger("hpcdet.core")


class Refused(Exception):
    """A handshake the relay turns down, with the reason the client will show."""


@dataclass
class Member:
    sock: socket.socket
    rank: int
    local_rank: int
    local_size: int
    cross_rank: int


class Relay:
    """The chief's relay thread; see the module docstring for what it guarantees."""

    def __init__(self, listener: socket.socket, size: int, connect_timeout: float) -> None:
        self._listener = listener
        self._port: int = listener.getsockname()[1]
        self._size = size
        self._connect_timeout = connect_timeout
        self._connect_deadline = time.monotonic() + connect_timeout
        self._sel = selectors.DefaultSelector()
        self._members: dict[int, Member] = {}
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
            tune(conn)
        except OSError as e:
            logger.warning("accepting a connection for collectives failed: %s", e)
            return
        conn.settimeout(HELLO_TIMEOUT)
        self._sel.register(conn, selectors.EVENT_READ, None)

    def _hello(self, sock: socket.socket) -> None:
        self._sel.unregister(sock)
        try:
            member = self._admit(sock, recv_frame(sock, HELLO_LIMIT))
            send_frame(sock, bytes([OK]))
        except Refused as e:
            logger.warning("refused a worker's connection: %s", e)
            try:
                send_frame(sock, bytes([ERR]), str(e).encode())
            except OSError:
                pass
            sock.close()
            return
        except (OSError, EOFError, ValueError, KeyError, TypeError) as e:
            logger.warning("dropped a connection that is not an hpcdet worker: %s", e)
            sock.close()
            return
        sock.settimeout(IO_TIMEOUT)
        self._members[member.rank] = member
        self._sel.register(sock, selectors.EVENT_READ, member)

    def _admit(self, sock: socket.socket, body: bytearray) -> Member:
        if not body.startswith(MAGIC):
            raise ValueError("bad handshake")
        hello = json.loads(body[len(MAGIC) :])
        rank, size = int(hello["rank"]), int(hello["size"])
        local_rank, local_size = int(hello["local_rank"]), int(hello["local_size"])
        cross_rank = int(hello["cross_rank"])
        if self._broken is not None:
            raise Refused(self._broken)
        if size != self._size:
            raise Refused(
                f"rank {rank} says the trial has {size} workers but the chief says {self._size}"
            )
        if not 0 <= rank < size:
            raise Refused(f"rank {rank} is outside [0, {size})")
        if rank in self._members or rank in self._closed:
            raise Refused(
                f"rank {rank} already joined this chief: two workers have the same rank, or "
                "another trial uses the same port (give each trial its own port with "
                "INTER_TRAIN_PROCESS_COMM_PORT_1 or port_offset)"
            )
        for m in self._members.values():
            if m.cross_rank == cross_rank and (
                m.local_size != local_size or m.local_rank == local_rank
            ):
                raise Refused(
                    f"rank {rank} (local_rank={local_rank}, local_size={local_size}) does not "
                    f"fit node {cross_rank}, where rank {m.rank} has local_rank={m.local_rank}, "
                    f"local_size={m.local_size}"
                )
        return Member(sock, rank, local_rank, local_size, cross_rank)

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

    def _request(self, member: Member) -> None:
        try:
            body = memoryview(recv_frame(member.sock))
            if len(body) < 2:
                raise EOFError("malformed request")
        except (OSError, EOFError) as e:
            self._lost(member, e)
            return
        op, scope = body[0], (member.cross_rank if body[1] else GLOBAL)
        if op == BYE:
            self._goodbye(member)
            return
        problem = self._broken or self._closed_in(scope)
        if problem is not None:
            self._reply(member, bytes([ERR]) + problem.encode())
            return
        round_ = self._rounds.setdefault(scope, {})
        round_[member.rank] = (op, body[2:])
        expected = self._size if scope == GLOBAL else member.local_size
        if len(round_) == expected:
            self._finish(scope)

    def _closed_in(self, scope: int) -> str | None:
        gone = sorted(r for r, node in self._closed.items() if scope in (GLOBAL, node))
        if not gone:
            return None
        where = "the trial" if scope == GLOBAL else f"node {scope}"
        return (
            f"rank {gone[0]} already closed its DistributedContext, so collectives among "
            f"{where} cannot complete"
        )

    def _finish(self, scope: int) -> None:
        round_ = self._rounds.pop(scope)
        members = sorted(
            (self._members[r] for r in round_),
            key=lambda m: m.rank if scope == GLOBAL else m.local_rank,
        )
        ops = [round_[m.rank][0] for m in members]
        if len(set(ops)) > 1:
            calls = ", ".join(
                f"rank {m.rank} called {OP_NAMES.get(op, op)}" for m, op in zip(members, ops)
            )
            where = "the trial" if scope == GLOBAL else f"node {scope}"
            message = (
                f"collective mismatch among {where}: {calls}; every worker must call the same "
                "collectives in the same order"
            ).encode()
            for m in members:
                self._reply(m, bytes([ERR]) + message)
            return
        blobs = [round_[m.rank][1] for m in members]
        everyone = bytes([OK]) + pack_blobs(blobs[:1] if ops[0] == BROADCAST else blobs)
        nothing = bytes([OK]) + pack_blobs([])
        # The scope chief last: rank 0 lives in this process, and if it went on and exited
        # before the others had their replies, they would never get them.
        for i, m in reversed(list(enumerate(members))):
            self._reply(m, nothing if ops[0] == GATHER and i > 0 else everyone)

    def _reply(self, member: Member, body: bytes) -> None:
        if member.rank not in self._members:
            return
        try:
            send_frame(member.sock, body)
        except OSError as e:
            self._lost(member, e)

    def _drop(self, member: Member) -> None:
        del self._members[member.rank]
        self._sel.unregister(member.sock)
        member.sock.close()

    def _goodbye(self, member: Member) -> None:
        self._drop(member)
        self._closed[member.rank] = member.cross_rank
        for scope in (GLOBAL, member.cross_rank):
            waiting = self._rounds.pop(scope, {})
            problem = self._closed_in(scope) or ""
            for rank in waiting:
                if rank in self._members:
                    self._reply(self._members[rank], bytes([ERR]) + problem.encode())

    def _lost(self, member: Member, error: BaseException) -> None:
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
        message = bytes([ERR]) + self._broken.encode()
        for rank in waiting:
            if rank in self._members:
                self._reply(self._members[rank], message)
