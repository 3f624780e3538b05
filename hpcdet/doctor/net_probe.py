"""Run once on each of two nodes (``python3 net_probe.py DIR SECONDS``): the first to claim
``DIR/net-claim`` listens on TCP and writes its IPv4 addresses to ``DIR/net-server.json``; the
other connects to one of them, sends a few bytes and reads them back reversed. Each writes what
it saw (host, the address and interface its connection used) to ``DIR/net-<role>.json``.

Standard library only and self-contained: `hpcdet doctor` copies this file beside its probe
job, whose Python may be any python3 on the nodes.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import struct
import sys
import time
from typing import Any

_SIOCGIFADDR = 0x8915  # Linux netdevice(7)
PAYLOAD = b"hpcdet-doctor"


def interfaces() -> dict[str, str]:
    """IPv4 address -> interface name."""
    found = {}
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR,
                                  struct.pack("256s", name[:15].encode()))
            except OSError:  # no IPv4 address
                continue
            found[socket.inet_ntoa(raw[20:24])] = name
    finally:
        probe.close()
    return found


def _write(path: str, data: dict[str, Any]) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)


def serve(work: str, deadline: float) -> dict[str, Any]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("0.0.0.0", 0))
    server.listen(1)
    server.settimeout(max(1.0, deadline - time.time()))
    # Loopback last: it only answers when both ends share a host (the PBS double's "nodes").
    addresses = sorted(interfaces(), key=lambda a: (a.startswith("127."), a))
    _write(os.path.join(work, "net-server.json"),
           {"addresses": addresses, "port": server.getsockname()[1]})
    conn, peer = server.accept()
    with conn:
        conn.settimeout(max(1.0, deadline - time.time()))
        data = conn.recv(len(PAYLOAD))
        conn.sendall(data[::-1])
        local = conn.getsockname()[0]
    return {"peer": peer[0], "address": local, "interface": interfaces().get(local, ""),
            "received": data.decode(errors="replace")}


def connect(work: str, deadline: float) -> dict[str, Any]:
    path = os.path.join(work, "net-server.json")
    while not os.path.exists(path):
        if time.time() > deadline:
            raise TimeoutError("the other node never said where it listens")
        time.sleep(0.1)
    with open(path) as f:
        told = json.load(f)
    errors = []
    for address in told["addresses"]:
        try:
            conn = socket.create_connection((address, told["port"]), timeout=5)
        except OSError as e:
            errors.append(f"{address}: {e}")
            continue
        with conn:
            conn.sendall(PAYLOAD)
            echoed = conn.recv(len(PAYLOAD))
            local = conn.getsockname()[0]
        return {"peer": address, "address": local, "interface": interfaces().get(local, ""),
                "echo_ok": echoed == PAYLOAD[::-1], "tried": errors}
    raise ConnectionError("; ".join(errors) or "the other node listed no IPv4 address")


def main(argv: list[str]) -> int:
    work, seconds = argv[0], float(argv[1])
    deadline = time.time() + seconds
    host = socket.gethostname()
    try:
        fd = os.open(os.path.join(work, "net-claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                     0o600)
    except FileExistsError:
        role = "client"
    else:
        os.close(fd)
        role = "server"
    try:
        seen = serve(work, deadline) if role == "server" else connect(work, deadline)
    except Exception as e:  # said in the result: the login node reports it
        seen = {"error": f"{type(e).__name__}: {e}"}
    _write(os.path.join(work, f"net-{role}.json"), {"host": host, **seen})
    return 0 if "error" not in seen else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
