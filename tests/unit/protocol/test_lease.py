"""The state directory's lease: one daemon, whichever host (``hpcdet.protocol.lease``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hpcdet.paths import StatePaths, hostname
from hpcdet.protocol import process
from hpcdet.protocol.lease import Lease, LeaseHeld, holder


@pytest.fixture
def paths(tmp_path: Path) -> StatePaths:
    p = StatePaths(tmp_path / "state")
    p.root.mkdir()
    return p


def _elsewhere(p: StatePaths, heartbeat: float, running: bool = True, generation: int = 1,
               lease: float = 120.0) -> None:
    """The record a daemon on another login node wrote."""
    p.daemon_record.write_text(json.dumps({
        "host": "login2.example", "pid": 4242, "generation": generation,
        "heartbeat": heartbeat, "running": running, "lease": lease}))


def test_the_first_daemon_takes_generation_one_and_its_heartbeat_names_it(
    paths: StatePaths,
) -> None:
    lease = Lease.take(paths, 60)
    assert lease.generation == 1
    assert lease.renew({"database": "/db"}) is None
    got = holder(paths)
    assert got is not None
    assert (got.host, got.generation, got.lease, got.running) == (hostname(), 1, 60, True)
    assert json.loads(paths.daemon_record.read_text())["database"] == "/db"


def test_a_live_daemon_on_another_host_keeps_the_lease(paths: StatePaths) -> None:
    _elsewhere(paths, time.time() - 100)
    with pytest.raises(LeaseHeld, match="on host login2.example \\(pid 4242\\)"):
        Lease.take(paths)
    assert holder(paths) is not None and holder(paths).host == "login2.example"  # type: ignore[union-attr]


def test_a_stopped_or_expired_daemon_elsewhere_is_taken_over_and_learns_it(
    paths: StatePaths,
) -> None:
    _elsewhere(paths, time.time(), running=False)
    first = Lease.take(paths)
    first.renew({})
    # Frozen for longer than its lease: the host's daemon is given up for dead.
    _elsewhere(paths, time.time() - 121, generation=first.generation)
    second = Lease.take(paths)
    assert second.generation == first.generation + 1
    before = paths.daemon_record.read_bytes()
    assert first.renew({}) is not None  # who took it: the first writes nothing more
    assert paths.daemon_record.read_bytes() == before
    assert second.renew({}) is None


def test_a_daemon_of_this_host_is_taken_over_at_once(paths: StatePaths) -> None:
    """The caller holds this host's daemon lock, so the one the record names is dead."""
    Lease.take(paths).renew({})
    assert Lease.take(paths).generation == 2


def test_a_daemon_starting_on_another_host_is_given_a_lease_to_write_its_record(
    paths: StatePaths,
) -> None:
    _elsewhere(paths, time.time() - 500, generation=3)
    claims = paths.root / "lease"
    claims.mkdir()
    (claims / "4").write_text(json.dumps({"host": "login3.example", "pid": 7,
                                          "at": time.time()}))
    with pytest.raises(LeaseHeld, match="starting .* login3.example"):
        Lease.take(paths)
    # One that died starting is given up after the lease.
    assert Lease.take(paths, now=time.time() + 121).generation == 5


def test_old_generations_are_removed(paths: StatePaths) -> None:
    for _ in range(6):
        Lease.take(paths)
    assert sorted(int(n.name) for n in (paths.root / "lease").iterdir()) == [4, 5, 6]


def test_a_cli_names_a_silent_daemon_elsewhere_and_when_its_lease_ends(
    paths: StatePaths,
) -> None:
    _elsewhere(paths, time.time() - 10)
    assert process.info(paths).alive and process.info(paths).silent() is None
    _elsewhere(paths, time.time() - 70)
    current = process.info(paths)
    assert current.alive
    silent = current.silent()
    assert silent is not None
    assert "runs on host login2.example (pid 4242)" in silent and "lease ends at" in silent
    _elsewhere(paths, time.time() - 130)
    assert not process.info(paths).alive


def test_a_scheduler_that_does_not_answer_the_daemon_elsewhere_is_said_with_since_when(
    paths: StatePaths,
) -> None:
    from hpcdet.views.cluster import daemon_view

    _elsewhere(paths, time.time())
    assert process.info(paths).unreachable() is None
    record = json.loads(paths.daemon_record.read_text())
    record["scheduler_unreachable"] = {"since": time.time() - 180, "polls": 6,
                                       "error": "squeue: Unable to contact slurm controller"}
    paths.daemon_record.write_text(json.dumps(record))
    said = process.info(paths).unreachable()
    assert said is not None and "has not answered since" in said and "6 polls" in said
    assert "Unable to contact slurm controller" in said
    view = daemon_view(paths)
    assert view["alive"] and view["where"].startswith("host login2.example")
    assert view["warnings"] == [said]
