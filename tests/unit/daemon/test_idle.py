"""A daemon with nothing to do ticks every IDLE_TICK_SECONDS, not every second, and leaves the
run bell alone; a request still reaches it at once when rung for, within IDLE_LOOP_SECONDS
when not, and an experiment ends the idling."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from hpcdet.daemon import loop
from hpcdet.protocol.calls import submit, wait_reply
from hpcdet.protocol.filedrop import ring
from hpcdet.protocol.process import STATUS_FILE, info
from hpcdet.rundir.atomic import write_text_atomic
from tests.unit.daemon.fake_local import FakeLocal, asha_config, create, drive, new_daemon


def test_idle_until_an_experiment_and_again_once_it_ends(tmp_path: Path) -> None:
    cluster = FakeLocal()
    daemon = new_daemon(tmp_path / "state", cluster)
    daemon.tick()
    assert daemon.idle
    create(daemon, asha_config(max_trials=2))
    daemon.tick()
    assert not daemon.idle
    drive(daemon, cluster)
    assert not daemon.store.experiments(unfinished=True)
    daemon.tick()
    assert daemon.idle


def test_an_idle_loop_ticks_rarely_and_answers_a_request_at_once(tmp_path: Path) -> None:
    daemon = new_daemon(tmp_path / "state", FakeLocal())
    ticks: list[float] = []
    bell_looks: list[float] = []
    tick, rung = daemon.tick, daemon.run_bell.rung

    def counted_tick(sweep: bool = True) -> None:
        ticks.append(time.monotonic())
        tick(sweep)

    def counted_rung() -> bool:
        bell_looks.append(time.monotonic())
        return rung()

    daemon.tick, daemon.run_bell.rung = counted_tick, counted_rung  # type: ignore[method-assign]
    server = threading.Thread(target=daemon.serve)
    server.start()
    try:
        time.sleep(3 * loop.TICK_SECONDS)
        assert len(ticks) == 1  # the first, which found nothing to do
        assert not bell_looks
        start = time.monotonic()
        rid = submit(daemon.paths, "ping", {})
        ring(daemon.paths)  # as a CLI on this host does
        assert wait_reply(daemon.paths, rid, 5, "the test's daemon")["pid"]
        assert time.monotonic() - start < 2 * loop.LOOP_SECONDS
        start = time.monotonic()
        rid = submit(daemon.paths, "ping", {})  # no ring: as from another login node
        assert wait_reply(daemon.paths, rid, 5, "the test's daemon")["pid"]
        assert time.monotonic() - start < loop.IDLE_LOOP_SECONDS + 2 * loop.LOOP_SECONDS
        assert len(ticks) == 3
    finally:
        daemon.stop()
        server.join()


def test_a_torn_status_file_reads_as_none(tmp_path: Path) -> None:
    daemon = new_daemon(tmp_path / "state", FakeLocal())
    write_text_atomic(daemon.local_dir / STATUS_FILE, '{"pid": 1')  # a crash's torn write
    assert info(daemon.paths).status == {}
    daemon.write_status()
    assert info(daemon.paths).status["pid"] > 0
