"""The keeper's frames over a real socket pair."""

from __future__ import annotations

import socket

import pytest

from hpcdet.remote import wire


def test_frames_round_trip_and_a_big_payload_is_split() -> None:
    a, b = socket.socketpair()
    with a, b:
        wire.send_json(a, wire.OPEN, {"exec": "hpcdet e list"})
        wire.send_exit(a, 3)
        wire.send(a, wire.STDIN_EOF)
        assert wire.receive(b) == (wire.OPEN, b'{"exec": "hpcdet e list"}')
        kind, payload = wire.receive(b)  # type: ignore[misc]
        assert kind == wire.EXIT and wire.exit_status(payload) == 3
        assert wire.receive(b) == (wire.STDIN_EOF, b"")
        big = bytes(range(256)) * 5000  # past MAX_FRAME: two frames
        sender = __import__("threading").Thread(target=wire.send, args=(a, wire.STDOUT, big))
        sender.start()
        got = wire.receive(b)[1] + wire.receive(b)[1]  # type: ignore[index]
        sender.join()
        assert got == big
        a.close()
        assert wire.receive(b) is None


def test_garbage_and_a_cut_frame_are_errors() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"Z\x00\x00\x00\x01x")
        with pytest.raises(wire.WireError, match="not a frame"):
            wire.receive(b)
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"o\x00\x00\x00\x10abc")
        a.close()
        with pytest.raises(wire.WireError, match="middle of a frame"):
            wire.receive(b)
