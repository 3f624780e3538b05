"""Frames between the CLI and the keeper over the keeper's Unix socket.

A frame is its kind (one byte), its length (four bytes, big-endian) and its payload. The CLI
sends OPEN (JSON: the cluster, its ssh host and hpcdet command, and either ``exec``, a command
line for the login node's shell, or ``subsystem: sftp``); the keeper may ask PROMPT
(keyboard-interactive: JSON title, instructions, [[prompt, echo], ...]) and take ANSWER
(JSON list of strings); then READY or ERROR (JSON kind and message). After READY an exec
carries STDIN and STDIN_EOF one way, STDOUT and STDERR the other, and ends with EXIT (the
exit status as a signed four-byte integer); an sftp channel carries raw bytes both ways, no
more frames. The CLI closing its socket closes the channel.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

from hpcdet.errors import HpcdetError

OPEN, PROMPT, ANSWER, READY, ERROR = b"O", b"P", b"A", b"R", b"E"
STDIN, STDIN_EOF, STDOUT, STDERR, EXIT = b"i", b"e", b"o", b"x", b"X"
KINDS = frozenset({OPEN, PROMPT, ANSWER, READY, ERROR, STDIN, STDIN_EOF, STDOUT, STDERR, EXIT})
MAX_FRAME = 1 << 20
_HEAD = struct.Struct(">cI")


class WireError(HpcdetError):
    """The other side broke the protocol or went away in the middle of a frame."""


def send(sock: socket.socket, kind: bytes, payload: bytes = b"") -> None:
    for start in range(0, max(len(payload), 1), MAX_FRAME):
        part = payload[start:start + MAX_FRAME]
        sock.sendall(_HEAD.pack(kind, len(part)) + part)


def send_json(sock: socket.socket, kind: bytes, value: Any) -> None:
    send(sock, kind, json.dumps(value).encode())


def send_exit(sock: socket.socket, status: int) -> None:
    send(sock, EXIT, struct.pack(">i", status))


def exit_status(payload: bytes) -> int:
    return int(struct.unpack(">i", payload)[0])


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        part = sock.recv(n - got)
        if not part:
            if got:
                raise WireError("the connection ended in the middle of a frame")
            return None
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def receive(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """The next frame, None when the other side closed between frames."""
    head = _read_exactly(sock, _HEAD.size)
    if head is None:
        return None
    kind, size = _HEAD.unpack(head)
    if kind not in KINDS or size > MAX_FRAME:
        raise WireError(f"not a frame of hpcdet's keeper: kind {kind!r}, {size} bytes")
    payload = _read_exactly(sock, size) if size else b""
    if payload is None:
        raise WireError("the connection ended in the middle of a frame")
    return kind, payload


def decode(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except ValueError as e:
        raise WireError(f"a frame that is not JSON: {e}") from e


class RemoteError(HpcdetError):
    """The cluster cannot be reached, refused us, or lacks a fitting hpcdet; the message says
    what to do."""


class ConnectionLost(RemoteError):
    """The connection ended in the middle of a command: what is made once (an upload, a
    create by its request id) may be sent again."""
