"""Commands and Creation: the operations users ask for, their state rules and errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hpcdet.daemon import requests as req
from hpcdet.daemon.commands import Commands
from hpcdet.daemon.controls import Controls
from hpcdet.daemon.creation import Creation
from hpcdet.daemon.queueing import Queue
from hpcdet.daemon.submission import Submission
from hpcdet.errors import ConfigError, HpcdetError, NotFoundError, StateError, UsageError
from hpcdet.link import Client
from hpcdet.protocol.messages import REQUESTS, Create, Pause, Ping, Request, encode
from hpcdet.rundir import layout
from hpcdet.rundir.atomic import read_json
from tests.unit.daemon.services.support import CONFIG, World


class Built:
    def __init__(self, w: World) -> None:
        jobs = w.jobs()
        guard = w.guard(jobs)
        site = w.site()
        controls = Controls(w.store, w.paths, w.configs, jobs, site, guard)
        submission = Submission(w.store, w.journal, w.paths, w.cluster, w.configs, jobs, site,
                                w.search, controls, guard)
        queue = Queue(w.store, w.journal, w.paths, w.configs, jobs, site, controls)
        self.creation = Creation(w.store, w.journal, w.paths, w.configs, w.search, guard,
                                 submission)
        self.stopped = False
        self.commands = Commands(w.store, w.journal, w.paths, w.configs, controls, submission,
                                 w.retention(), queue, self.creation, w.finisher(jobs),
                                 self.stop)

    def stop(self) -> None:
        self.stopped = True


def _staging(w: World, name: str = "req") -> str:
    staging = w.paths.requests / f"{name}.context"
    staging.mkdir(parents=True)
    (staging / "train.py").write_text("print(1)\n")
    return str(staging)


def test_create_moves_the_context_into_the_experiment_and_submits(tmp_path: Path) -> None:
    w = World(tmp_path)
    built = Built(w)
    reply = built.commands.handle("create", {"config": CONFIG, "staging": _staging(w),
                                             "request_id": "r1"})
    assert {k: v for k, v in reply.items() if k != "warning"} == {
        "experiment_id": 1, "trial_ids": [1], "image": None, "image_reserved": ""}
    assert (w.paths.context(1) / "train.py").read_text() == "print(1)\n"
    assert w.store.runs()[0].job_id == "101"
    # The same request carried out again (its reply was lost) answers with what it made.
    again = built.creation.create(CONFIG, str(w.paths.requests / "req.context"), "r1")
    assert again["experiment_id"] == 1 and len(w.store.experiments()) == 1
    # Sent again with a snapshot of its own (a laptop whose connection dropped after the
    # create was taken): still the one experiment, and the second snapshot is not kept.
    resent = _staging(w, "resent")
    again = built.creation.create(CONFIG, resent, "r1")
    assert again["experiment_id"] == 1 and len(w.store.experiments()) == 1
    assert not Path(resent).exists() and w.store.runs()[0].job_id == "101"
    assert len(w.store.runs()) == 1
    # The id survives the database's rebuild from the journal.
    assert w.store.experiment_of_request("r1") == 1
    assert w.store.experiment_of_request("other") is None


def test_an_image_to_convert_is_locked_for_the_cli_before_its_jobs_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that starts before the CLI converts the image waits for it (hpcdet.images)."""
    w = World(tmp_path)
    built = Built(w)
    lock = w.paths.images / "acme+x+1.sif.lock"
    locked_at_sbatch: list[bool] = []
    run = w.runner.run

    def sbatch_sees_the_lock(cmd: list[str], check: bool = True, stdin: str | None = None,
                             cwd: Path | None = None) -> Any:
        if cmd[0] == "sbatch":
            locked_at_sbatch.append(lock.is_dir())
        return run(cmd, check, stdin, cwd)

    monkeypatch.setattr(w.runner, "run", sbatch_sees_the_lock)
    config = {**CONFIG, "environment": {"image": "acme/x:1"}}
    reply = built.commands.handle("create", {"config": config, "staging": _staging(w, "a"),
                                             "request_id": "a", "convert": True})
    assert reply["image"]["image"]["file"] == str(lock.with_suffix(""))
    assert reply["image_reserved"] == (lock / "holder").read_text().strip()
    assert "experiment 1" in reply["image_reserved"] and locked_at_sbatch == [True]
    # A caller that does not convert (the SDK) leaves it to the jobs.
    shutil.rmtree(lock)
    reply = built.creation.create(config, _staging(w, "b"), "b", convert=False)
    assert reply["image_reserved"] == "" and locked_at_sbatch == [True, False]
    # A create that fails after the lock was taken lets it go: no CLI comes to convert.

    def broken() -> None:
        raise RuntimeError("a bug in submission")

    monkeypatch.setattr(built.creation.submission, "submit_queued", broken)
    with pytest.raises(RuntimeError):
        built.creation.create(config, _staging(w, "c"), "c", convert=True)
    assert not lock.exists()


def test_a_create_whose_snapshot_is_gone_says_so(tmp_path: Path) -> None:
    w = World(tmp_path)
    with pytest.raises(StateError, match="the CLI gave up on this request"):
        Built(w).creation.create(CONFIG, str(w.paths.requests / "gone.context"), "r9")


def test_pause_activate_and_kill_follow_the_state_rules(tmp_path: Path) -> None:
    w = World(tmp_path)
    commands = Built(w).commands
    commands.handle("create", {"config": CONFIG, "staging": _staging(w)})
    assert commands.handle("pause", {"exp_id": 1}) == "Paused experiment 1"
    assert w.store.experiment(1).state == "PAUSED"
    with pytest.raises(StateError, match="experiment 1 is PAUSED; only ACTIVE ones can pause"):
        commands.handle("pause", {"exp_id": 1})
    assert commands.handle("activate", {"exp_id": 1}) == "Activated experiment 1"
    assert commands.handle("kill", {"exp_id": 1}) == "Killed experiment 1"
    assert w.store.experiment(1).state == "STOPPING_CANCELED"
    assert ["scancel", "101"] in w.runner.commands("scancel")
    with pytest.raises(StateError, match="only a finished experiment can continue"):
        commands.handle("continue", {"exp_id": 1})


def test_unknown_operations_ids_and_checkpoints_are_refused(tmp_path: Path) -> None:
    w = World(tmp_path)
    built = Built(w)
    with pytest.raises(HpcdetError, match="unknown request 'nope'"):
        built.commands.handle("nope", {})
    with pytest.raises(UsageError, match="exp_id"):
        built.commands.handle("pause", {"exp_id": 2**63})
    with pytest.raises(NotFoundError, match="checkpoint c1 not found"):
        built.commands.handle("delete_checkpoint", {"uuid": "c1"})
    assert built.commands.handle("shutdown", {}) == "stopping" and built.stopped


def test_the_dispatch_table_serves_every_request_type(tmp_path: Path) -> None:
    """A request type added to hpcdet.protocol.messages without its handler fails this."""
    assert Built(World(tmp_path)).commands.handlers.kinds == set(REQUESTS.values())


def test_requests_left_on_disk_by_the_previous_release_are_served(tmp_path: Path) -> None:
    """Request files as hpcdet before the typed protocol wrote them (a CLI waiting while the
    user upgrades and restarts the daemon): served as they were meant, and one the daemon
    cannot read answered with why, not a traceback."""
    w = World(tmp_path)
    built = Built(w)
    staging = _staging(w, "1764340000.000001-0a1b2c3d")
    literal = {
        "1764340000.000001-0a1b2c3d": '{"op": "create", "args": {"config": CONFIG, "staging": '
        '"STAGING", "request_id": "1764340000.000001-0a1b2c3d", "python": "PYTHON"}, "pid": 4242}'
        .replace("CONFIG", json.dumps(CONFIG)).replace("STAGING", staging)
        .replace("PYTHON", sys.executable),
        "1764340000.000002-0a1b2c3d": '{"op": "set_experiment", "args": {"exp_id": 1, '
        '"field": "labels_add", "value": "old"}, "pid": 4242}',
        "1764340000.000003-0a1b2c3d": '{"op": "update_jobs", "args": {"updates": [{"job": 1, '
        '"field": "priority", "value": 7}]}, "pid": 4242}',
        "1764340000.000004-0a1b2c3d": '{"op": "pause", "args": {"exp_id": 1}, "pid": 4242}',
        "1764340000.000005-0a1b2c3d": '{"op": "ping", "args": {}, "pid": 4242}',
        "1764340000.000006-0a1b2c3d": '{"op": "pause", "args": {"experiment": 1}, "pid": 4242}',
        "1764340000.000007-0a1b2c3d": '{"args": {"exp_id": 1}, "pid": 4242}',
    }
    for rid, text in literal.items():
        (w.paths.requests / f"{rid}.json").write_text(text)
    assert req.serve_pending(w.paths, built.commands.handle) == len(literal)
    replies = {rid: read_json(w.paths.requests / f"{rid}.reply.json") for rid in literal}
    created, labeled, updated, paused, pong, wrong, no_op = replies.values()
    assert created["ok"] and created["result"]["experiment_id"] == 1
    assert created["result"]["trial_ids"] == [1]
    assert labeled == {"ok": True, "result": "Added label 'old' to experiment 1"}
    assert updated["ok"], updated
    assert paused == {"ok": True, "result": "Paused experiment 1"}
    assert pong["ok"] and pong["result"]["pid"] == os.getpid()
    assert wrong == {"ok": False, "error": (
        "request 'pause' has no argument experiment; this CLI and the daemon are of different "
        "hpcdet versions: restart the daemon")}
    assert no_op == {"ok": False, "error": "unknown request None"}
    assert sorted(p.name for p in w.paths.requests.iterdir()
                  if not p.name.endswith(".reply.json")) == []


class Loopback:
    """A whole transport: what a second one (SSH) must do, here into the daemon's own
    ``Commands.handle`` in this process, through JSON as on any wire."""

    def __init__(self, commands: Commands, requests: Path) -> None:
        self.commands, self.requests = commands, requests

    def send(self, request: Request[Any]) -> object:
        wire = json.loads(json.dumps(encode(request)))
        return json.loads(json.dumps(self.commands.handle(*wire)))

    def send_with_context(self, take: Callable[[Path], None],
                          request: Callable[[str, Path], Create],
                          request_id: str | None = None) -> object:
        staging = self.requests / "loop.context"
        take(staging)
        return self.send(request(request_id or "loop", staging))


def test_a_client_over_another_transport_creates_and_acts(tmp_path: Path) -> None:
    w = World(tmp_path)
    client = Client(Loopback(Built(w).commands, w.paths.requests))
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "train.py").write_text("print(1)\n")
    created = client.create(CONFIG, context)
    assert (created.experiment_id, created.trial_ids) == (1, [1])
    assert (w.paths.context(1) / "train.py").read_text() == "print(1)\n"
    assert client.send(Pause(1)) == "Paused experiment 1"
    assert client.send(Ping()).pid == os.getpid()
    with pytest.raises(StateError, match="only ACTIVE ones can pause"):
        client.send(Pause(1))


def test_trials_run_with_the_submitters_python_and_sharing_hpcdets_is_said(
        tmp_path: Path) -> None:
    w = World(tmp_path)
    built = Built(w)
    own = tmp_path / "train-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(own)], check=True)
    reply = built.creation.create(CONFIG, _staging(w, "a"), "a", python=str(own / "bin/python3"))
    assert reply["warning"] == ""
    assert w.configs.get(w.store.experiment(1)).environment.python == str(own / "bin/python3")
    shared = built.creation.create(CONFIG, _staging(w, "b"), "b", python=sys.executable)
    assert "the Python environment hpcdet itself runs from" in shared["warning"]
    with pytest.raises(ConfigError, match="environment.python: cannot run /nonexistent/python3"):
        built.creation.create({**CONFIG, "environment": {"python": "/nonexistent/python3"}},
                              _staging(w, "c"), "c")
    assert len(w.store.experiments()) == 2


def test_stopping_an_experiment_closes_its_arrays_and_kill_cancels_them(tmp_path: Path) -> None:
    """An array task the search never gave a trial must not start after a stop and wait for
    ever: the stop writes the array's closed marker (which the task's wait loop checks), and a
    kill drops the whole array at once, before a daemon stopped right after could not."""
    w = World(tmp_path)
    commands = Built(w).commands
    config = {**CONFIG, "hyperparameters": {"x": {"type": "int", "minval": 1, "maxval": 9}},
              "searcher": {"name": "random", "metric": "loss", "max_trials": 6,
                           "max_concurrent_trials": 2, "max_length": 1}}
    for name in ("a", "b"):
        commands.handle("create", {"config": config, "staging": _staging(w, name)})
    arrays = {a.experiment_id: a.job_id for a in w.store.arrays()}
    assert len(arrays) == 2, arrays

    def closed(exp_id: int) -> bool:
        return layout.array_closed(w.paths.experiment(exp_id)).exists()

    assert not closed(1) and not closed(2)
    commands.handle("cancel", {"exp_id": 1})
    assert closed(1) and not closed(2)
    assert not any(arrays[1] in c for c in w.runner.commands("scancel"))  # graceful
    commands.handle("kill", {"exp_id": 2})
    assert closed(2)
    assert any(arrays[2] in c for c in w.runner.commands("scancel"))
