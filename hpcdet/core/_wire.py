"""The wire format of hpcdet's TCP collectives (``hpcdet.core._tcp``): frames of an 8-byte
big-endian length and a body, the handshake's magic, and the operation and status codes."""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence

LEN = struct.Struct("!Q")
COUNT = struct.Struct("!I")
MAGIC = b"hpcdet-collectives-1\n"
HELLO_LIMIT = 64 * 1024

ALLGATHER, GATHER, BROADCAST, BYE = 1, 2, 3, 4
OP_NAMES = {ALLGATHER: "allgather", GATHER: "gather", BROADCAST: "broadcast"}
OK, ERR = 0, 1
GLOBAL = -1  # scope key of trial-wide rounds; node rounds use the node's cross_rank

# The relay reads a frame once the socket is readable; a peer that stalls mid-frame for this
# long is treated as lost rather than blocking the relay forever.
IO_TIMEOUT = 120.0
HELLO_TIMEOUT = 10.0


def tune(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # Keepalive notices a node that vanished without closing its connections (~90 s).
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 6)):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


def send_frame(sock: socket.socket, *parts: bytes) -> None:
    size = sum(len(p) for p in parts)
    sock.sendall(b"".join((LEN.pack(size), *parts)))


def recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], min(n - got, 1 << 20))
        if k == 0:
            raise EOFError("connection closed")
        got += k
    return buf


def recv_frame(sock: socket.socket, limit: int | None = None) -> bytearray:
    (size,) = LEN.unpack(recv_exact(sock, LEN.size))
    if limit is not None and size > limit:
        raise ValueError(f"frame of {size} bytes exceeds {limit}")
    return recv_exact(sock, size)


def pack_blobs(blobs: Sequence[bytes | memoryview]) -> bytes:
    parts: list[bytes | memoryview] = [COUNT.pack(len(blobs))]
    for blob in blobs:
        parts += [LEN.pack(len(blob)), blob]
    return b"".join(parts)


def unpack_blobs(data: memoryview) -> list[memoryview]:
    (count,) = COUNT.unpack_from(data, 0)
    pos = COUNT.size
    blobs = []
    for _ in range(count):
        (size,) = LEN.unpack_from(data, pos)
        pos += LEN.size
        blobs.append(data[pos : pos + size])
        pos += size
    return blobs
