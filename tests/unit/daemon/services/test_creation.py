"""`Creation`: the config's one parse and hpcdet's fill-ins; a create the CLI stopped waiting
for (issue 10, item 8), answered later with its context whole, or withdrawn with nothing left
behind."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon import requests as req
from hpcdet.daemon.loop import Daemon
from hpcdet.errors import HpcdetError
from hpcdet.link import files as client_files
from hpcdet.paths import StatePaths
from hpcdet.protocol import calls
from hpcdet.protocol.filedrop import TAKEN
from hpcdet.schedulers.runner import CommandRunner, Result
from hpcdet.snapshot import snapshot
from tests.support import Hpcdet

CONFIG = {"name": "x", "entrypoint": "python3 train.py",
          "searcher": {"name": "single", "metric": "x", "max_length": 1}}


class FakeSlurm(CommandRunner):
    """sbatch accepts every job; squeue knows none."""

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        return Result("101\n" if cmd[0] == "sbatch" else "", "", 0)


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def user(tmp_path: Path) -> Hpcdet:
    """A user whose daemon looks alive on another login node: nothing takes a request
    until the test does."""
    h = Hpcdet(tmp_path / "user", "slurm", {"HPCDET_REQUEST_TIMEOUT": "0.5"})
    h.state.mkdir()
    (h.state / "daemon.json").write_text(json.dumps(
        {"host": "login2.example", "pid": 1, "running": True, "heartbeat": time.time()}))
    context = tmp_path / "context"
    (context / "data").mkdir(parents=True)
    (context / "train.py").write_text("print('train')\n")
    (context / "data" / "x.txt").write_text("x\n")
    (tmp_path / "exp.yaml").write_text(json.dumps(CONFIG))
    return h


def _create(h: Hpcdet) -> subprocess.Popen[str]:
    tmp = h.root.parent
    return subprocess.Popen(
        [sys.executable, "-m", "hpcdet.cli.main", "experiment", "create",
         str(tmp / "exp.yaml"), str(tmp / "context")],
        env=h.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _daemon(paths: StatePaths) -> Daemon:
    """The daemon the record says runs on login2 (its lease is taken with the record put
    aside, as that host's daemon took it; the record stays as it was until its heartbeat)."""
    record = paths.daemon_record.read_bytes() if paths.daemon_record.exists() else None
    paths.daemon_record.unlink(missing_ok=True)
    daemon = Daemon(paths, ClusterConfig(backend="slurm"), FakeSlurm())
    if record is not None:
        paths.daemon_record.write_bytes(record)
    return daemon


def test_a_create_taken_but_answered_after_the_cli_gave_up_keeps_its_context(
    user: Hpcdet, caplog: pytest.LogCaptureFixture
) -> None:
    paths = StatePaths(user.state)
    daemon = _daemon(paths)
    cli = _create(user)
    deadline = time.monotonic() + 30
    while not list(paths.requests.glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.02)

    def slow(op: str, args: dict[str, Any]) -> Any:
        cli.wait(timeout=30)  # the daemon took the request, then the CLI gave up on it
        return daemon.handle(op, args)

    with caplog.at_level(logging.INFO, logger=req.__name__):
        assert req.serve_pending(paths, slow) == 1
    _, err = cli.communicate()
    assert "'experiment_id': 1" in caplog.text  # the answer nobody waits for is logged
    assert [e.id for e in daemon.store.experiments()] == [1]
    assert _files(paths.context(1)) == _files(user.root.parent / "context")
    assert list(paths.requests.iterdir()) == []
    assert cli.returncode == 1
    assert "took the request" in err and "creates the experiment" in err, err


def test_a_create_taken_by_a_daemon_that_died_is_created_by_the_next_with_its_context(
    user: Hpcdet,
) -> None:
    paths = StatePaths(user.state)
    cli = _create(user)
    deadline = time.monotonic() + 30
    while not (pending := list(paths.requests.glob("*.json"))) and time.monotonic() < deadline:
        time.sleep(0.02)
    # As a daemon killed right after it took the request leaves it:
    pending[0].rename(pending[0].with_suffix(TAKEN))
    _, err = cli.communicate(timeout=30)
    daemon = _daemon(paths)
    daemon.tick()
    assert [e.id for e in daemon.store.experiments()] == [1]
    assert _files(paths.context(1)) == _files(user.root.parent / "context")
    assert cli.returncode == 1 and "creates the experiment" in err, err
    assert list(paths.requests.iterdir()) == []


def test_a_create_withdrawn_after_the_cli_gave_up_leaves_nothing(user: Hpcdet) -> None:
    paths = StatePaths(user.state)
    cli = _create(user)
    _, err = cli.communicate(timeout=30)
    assert cli.returncode == 1
    assert "withdrawn and no experiment was created" in err, err
    daemon = _daemon(paths)
    daemon.tick()  # the daemon comes back: nothing is left for it to do
    assert list(paths.requests.iterdir()) == []
    assert list(paths.runs.glob("exp-*")) == []
    assert daemon.store.experiments() == []


def test_a_create_the_daemon_refuses_removes_the_snapshot_it_was_handed(
    tmp_path: Path,
) -> None:
    """Once taken the snapshot is the daemon's: a CLI that gave up no longer removes it."""
    paths = StatePaths(tmp_path / "state")
    daemon = _daemon(paths)
    staging = paths.requests / "one.context"
    context = tmp_path / "context"
    context.mkdir()
    (context / "train.py").write_text("print('train')\n")
    snapshot(context, staging)
    with pytest.raises(HpcdetError, match="searcher"):
        daemon.handle("create", {"config": {**CONFIG, "searcher": {"name": "nope"}},
                                 "staging": str(staging), "request_id": "one"})
    assert not staging.exists()
    assert list(paths.runs.glob("exp-*")) == []


def test_a_create_answered_as_the_cli_gives_up_shows_the_answer(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    rid = calls.submit(paths, "create", {})
    req.serve_pending(paths, lambda op, args: {"experiment_id": 7})
    staging = paths.requests / f"{rid}.context"
    outcome = client_files.give_up(paths, rid, staging, KeyboardInterrupt())
    assert outcome == {"experiment_id": 7}
    assert list(paths.requests.iterdir()) == []


def _created(tmp_path: Path, config: dict[str, Any]) -> tuple[Daemon, dict[str, Any]]:
    paths = StatePaths(tmp_path / "state")
    daemon = _daemon(paths)
    staging = paths.requests / "one.context"
    context = tmp_path / "context"
    context.mkdir(exist_ok=True)
    snapshot(context, staging)
    reply = daemon.handle("create", {"config": config, "staging": str(staging),
                                     "python": sys.executable, "request_id": ""})
    return daemon, daemon.store.experiment(reply["experiment_id"]).config.to_dict()


def test_the_fill_ins_are_stored_with_the_default_storage_s_own_defaults(
    tmp_path: Path,
) -> None:
    daemon, stored = _created(tmp_path, {**CONFIG, "checkpoint_storage": {"save_trial_best": 3}})
    storage = stored["checkpoint_storage"]
    assert storage["type"] == "shared_fs" and storage["save_trial_best"] == 3
    assert storage["host_path"] == str(daemon.paths.default_checkpoints())
    assert storage["save_experiment_best"] == 0  # filled by the one parse, not left out
    assert stored["environment"]["python"] == str(Path(sys.executable))
    record = json.loads(daemon.paths.experiment_record(1).read_text())
    assert record["config"] == stored


def test_a_config_naming_its_own_storage_and_python_keeps_them(tmp_path: Path) -> None:
    own = tmp_path / "ckpts"
    _, stored = _created(tmp_path, {
        **CONFIG, "checkpoint_storage": {"type": "shared_fs", "host_path": str(own)},
        "environment": {"python": sys.executable}})
    assert stored["checkpoint_storage"]["host_path"] == str(own)
    assert stored["environment"]["python"] == str(Path(sys.executable))


def test_a_bad_storage_section_is_named_by_the_validation(tmp_path: Path) -> None:
    with pytest.raises(HpcdetError, match="checkpoint_storage"):
        _created(tmp_path, {**CONFIG, "checkpoint_storage": "somewhere"})
