"""The daemon and the state directory's lease (``protocol/lease.py``): a daemon taken over
while it was frozen stops at its next heartbeat and writes nothing more, also in the middle
of catching up."""

from __future__ import annotations

import json
from pathlib import Path

from hpcdet.protocol.lease import Lease
from tests.unit.daemon.fake_local import FakeLocal, asha_config, create, new_daemon


def test_a_daemon_taken_over_stops_at_its_next_heartbeat_and_writes_nothing(
    tmp_path: Path,
) -> None:
    daemon = new_daemon(tmp_path / "state", FakeLocal())
    create(daemon, asha_config(max_trials=2))
    daemon.tick()
    assert json.loads(daemon.paths.daemon_record.read_text())["generation"] == 1
    # Another daemon takes the next generation, as one on another host does once this one's
    # heartbeat is older than the lease.
    successor = Lease.take(daemon.paths)
    successor.renew({"database": "elsewhere"})
    record = daemon.paths.daemon_record.read_bytes()
    daemon.lease.renewed = 0.0  # its heartbeat is due
    assert not daemon.heartbeat()
    assert daemon.stopping and daemon.deposed is not None
    daemon.write_status()
    polls = daemon.jobs.polls
    daemon.reconcile()  # catching up stops at once: nothing is polled or submitted
    assert daemon.jobs.polls == polls
    assert daemon.paths.daemon_record.read_bytes() == record
    assert json.loads(record)["generation"] == successor.generation == 2
