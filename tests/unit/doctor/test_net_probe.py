"""The network probe: two real processes on this host, one listening, one connecting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hpcdet.doctor.diagnose import NET_PROBE
from hpcdet.doctor.net_probe import interfaces


def test_two_processes_exchange_bytes_and_say_the_address_and_interface(tmp_path: Path) -> None:
    cmd = [sys.executable, str(NET_PROBE), str(tmp_path), "10"]
    procs = [subprocess.Popen(cmd) for _ in range(2)]
    assert [p.wait(timeout=15) for p in procs] == [0, 0]
    server = json.loads((tmp_path / "net-server.json").read_text())
    client = json.loads((tmp_path / "net-client.json").read_text())
    assert client["echo_ok"] and server["received"] == "hpcdet-doctor"
    assert client["peer"] in interfaces() and client["interface"] == interfaces()[client["peer"]]
    assert server["address"] == client["peer"]


def test_a_client_without_a_server_gives_up_by_its_deadline(tmp_path: Path) -> None:
    (tmp_path / "net-claim").touch()  # the server's claim, but it never listens
    p = subprocess.run([sys.executable, str(NET_PROBE), str(tmp_path), "0.3"],
                       timeout=10)
    assert p.returncode == 1
    said = json.loads((tmp_path / "net-client.json").read_text())
    assert said["error"] == "TimeoutError: the other node never said where it listens"
