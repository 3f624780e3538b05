"""core_context.preempt: the scheduler's preempt file, the daemon's control.json, the ack."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hpcdet import core
from hpcdet.core._context import RunEvents
from hpcdet.core._preempt import PreemptWatcher
from hpcdet.rundir.atomic import write_atomic
from hpcdet.rundir.spec import CLUSTER_INFO_ENV
from tests.unit.core.core_fakes import FakeRun


def _wait_for(ctx: core.Context, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ctx.preempt.should_preempt(auto_ack=False):
            return True
        time.sleep(0.05)
    return False


def _control(run: FakeRun, preempt: bool, reason: str = "") -> None:
    write_atomic(
        run.run_dir / "control.json",
        {"preempt": preempt, "reason": reason, "best_validation": None},
    )


def test_daemon_request_through_control_json(
    on_cluster: FakeRun, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hpcdet.core")
    with core.init() as ctx:
        _control(on_cluster, False)
        assert not ctx.preempt.should_preempt()
        _control(on_cluster, True, "paused by user")
        assert _wait_for(ctx)
        assert on_cluster.bodies("preempt_ack") == []
        assert ctx.preempt.should_preempt()  # auto_ack: acknowledged and flushed at once
        assert len(on_cluster.bodies("preempt_ack")) == 1
        _control(on_cluster, False)
        time.sleep(0.7)
        assert ctx.preempt.should_preempt()  # stays true
    assert len(on_cluster.bodies("preempt_ack")) == 1
    assert "preemption requested: paused by user" in caplog.messages


def test_scheduler_request_through_the_preempt_file(on_cluster: FakeRun) -> None:
    (on_cluster.run_dir / "preempt").touch()
    with core.init() as ctx:
        # Checked once when the context starts, so the first answer is already true.
        assert ctx.preempt.should_preempt()
    assert [e.type for e in on_cluster.events()] == ["preempt_ack"]


def test_the_watcher_picks_up_a_file_created_later(on_cluster: FakeRun) -> None:
    with core.init() as ctx:
        assert not ctx.preempt.should_preempt()
        (on_cluster.run_dir / "preempt").touch()
        assert _wait_for(ctx)


def test_manual_ack(on_cluster: FakeRun) -> None:
    (on_cluster.run_dir / "preempt").touch()
    with core.init() as ctx:
        assert ctx.preempt.should_preempt(auto_ack=False)
        assert on_cluster.events() == []
        ctx.preempt.acknowledge_preemption_signal()
        ctx.preempt.acknowledge_preemption_signal()
        ctx.preempt.should_preempt()
    assert len(on_cluster.bodies("preempt_ack")) == 1


def test_should_preempt_before_start(on_cluster: FakeRun) -> None:
    ctx = core.init()
    try:
        with pytest.raises(RuntimeError, match="before the PreemptContext was started"):
            ctx.preempt.should_preempt()
    finally:
        ctx.close()


def _worker_preempt(tmp_path: Path, mode: core.PreemptMode, **kw: Any) -> core.PreemptContext:
    dist = core.DistributedContext(
        rank=1, size=2, local_rank=1, local_size=2, cross_rank=0, cross_size=1, **kw
    )
    watcher = PreemptWatcher(tmp_path / "preempt", tmp_path / "control.json")
    ctx = core.PreemptContext(dist, watcher, RunEvents(None), mode)
    ctx.start()
    return ctx


def test_chief_only_mode_refuses_workers(tmp_path: Path) -> None:
    preempt = _worker_preempt(tmp_path, core.PreemptMode.ChiefOnly)
    with pytest.raises(RuntimeError) as err:
        preempt.should_preempt()
    assert str(err.value) == (
        "PreemptContext was configured with preempt_mode=ChiefOnly but .should_preempt() was "
        "called from non-chief worker of rank=1"
    )


def test_workers_ask_chief_is_a_collective(tmp_path: Path) -> None:
    preempt = _worker_preempt(
        tmp_path, core.PreemptMode.WorkersAskChief, transport=core.Transport()
    )
    with pytest.raises(NotImplementedError, match="has no transport for its collectives"):
        preempt.should_preempt()


class _ChiefSaysYes(core.Transport):
    """What a worker receives when the chief broadcasts True."""

    def broadcast(self, obj: Any, *, local: bool) -> Any:
        return True


def test_workers_follow_the_chief_broadcast(tmp_path: Path) -> None:
    preempt = _worker_preempt(
        tmp_path, core.PreemptMode.WorkersAskChief, transport=_ChiefSaysYes()
    )
    # The worker watches nothing itself and acks nothing: the chief's ack counts.
    assert preempt.should_preempt()


def test_workers_ask_master_watch_on_their_own(tmp_path: Path) -> None:
    (tmp_path / "preempt").touch()
    preempt = _worker_preempt(tmp_path, core.PreemptMode.WorkersAskMaster)
    assert preempt.should_preempt()
    preempt.close()


def test_off_cluster_never_preempts(off_cluster: Path) -> None:
    with core.init() as ctx:
        assert isinstance(ctx.preempt, core.DummyPreemptContext)
        assert not ctx.preempt.should_preempt()


# A trial in its own process: SIGTERM's default action would end pytest's worker.
_TERMED = """
import os, signal, sys, time
from hpcdet import core
with core.init() as ctx:
    os.kill(os.getpid(), signal.SIGTERM)
    deadline = time.monotonic() + 5
    while not ctx.preempt.should_preempt() and time.monotonic() < deadline:
        time.sleep(0.05)
    print("asked" if ctx.preempt.should_preempt() else "not asked", flush=True)
# Checkpointed and on its way out: a further SIGTERM must not make its exit code 143.
print("ignored" if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN else "not ignored")
if len(sys.argv) > 1:  # a handler of the script's own stays the script's
    signal.signal(signal.SIGTERM, lambda s, f: print("own handler", flush=True))
    with core.init() as ctx:
        os.kill(os.getpid(), signal.SIGTERM)
"""


def _termed(run: FakeRun, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _TERMED, *args],
                          env={**run.env, CLUSTER_INFO_ENV: str(run.info_path)},
                          capture_output=True, text=True, timeout=60)


def test_sigterm_asks_the_trial_to_checkpoint(fake_run: FakeRun) -> None:
    """What a preemption or qdel sends every process of the job (hpcdet.core._preempt)."""
    p = _termed(fake_run, "own")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["asked", "ignored", "own handler"]
    assert "SIGTERM: the job is ending; asking the trial to checkpoint" in p.stderr
    assert (fake_run.run_dir / "preempt").exists()
    assert len(fake_run.bodies("preempt_ack")) == 1


def test_sigterm_after_the_daemons_kill_ends_the_trial_at_once(fake_run: FakeRun) -> None:
    (fake_run.run_dir / "kill").touch()
    p = _termed(fake_run)
    assert p.returncode == -signal.SIGTERM and p.stdout == ""
    assert not (fake_run.run_dir / "preempt").exists()
