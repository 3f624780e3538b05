"""A full disk under the daemon's requests and creates (issue 9, item 10): a request is carried
out once whatever happens to its reply, and a create that runs out of space leaves nothing."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon import requests as req
from hpcdet.daemon.loop import Daemon
from hpcdet.errors import DiskFullError
from hpcdet.paths import StatePaths
from hpcdet.protocol import calls
from hpcdet.rundir.atomic import read_json
from hpcdet.schedulers.runner import CommandRunner, Result
from hpcdet.snapshot import snapshot
from tests.full_disk import fill, mount_small_fs
from tests.support import EXAMPLES

CONFIG = {"name": "x", "entrypoint": "true",
          "searcher": {"name": "single", "metric": "x", "max_length": 1}}


class FakeSlurm(CommandRunner):
    """sbatch accepts every job; squeue knows none."""

    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        return Result("101\n" if cmd[0] == "sbatch" else "", "", 0)


def _tick(daemon: Daemon) -> None:
    """One tick as `Daemon.serve` runs it: a failing tick is logged and the loop goes on."""
    with contextlib.suppress(Exception):
        daemon.tick()


def _experiments(paths: StatePaths) -> list[str]:
    return sorted(d.name for d in paths.runs.glob("exp-*"))


@pytest.fixture
def requests_fs(tmp_path: Path) -> Iterator[Path]:
    yield from mount_small_fs(tmp_path / "state" / "requests")


@pytest.fixture
def state_fs(tmp_path: Path) -> Iterator[Path]:
    yield from mount_small_fs(tmp_path / "state", size="4m")


def test_a_create_whose_reply_cannot_be_written_is_carried_out_once(
    tmp_path: Path, requests_fs: Path
) -> None:
    paths = StatePaths(tmp_path / "state")
    daemon = Daemon(paths, ClusterConfig(backend="slurm"), FakeSlurm())
    staging = tmp_path / "staging"
    snapshot(EXAMPLES, staging)
    rid = calls.submit(paths, "create", {"config": CONFIG, "staging": str(staging)})
    filler = fill(requests_fs)
    for _ in range(4):
        _tick(daemon)
    assert _experiments(paths) == ["exp-1"]
    assert [e.id for e in daemon.store.experiments()] == [1]
    assert not (paths.requests / f"{rid}.reply.json").exists()

    filler.unlink()
    _tick(daemon)
    reply = read_json(paths.requests / f"{rid}.reply.json")
    assert reply["ok"], reply
    assert reply["result"]["experiment_id"] == 1
    for _ in range(2):
        _tick(daemon)
    assert _experiments(paths) == ["exp-1"]
    assert daemon.journal.max_ids() == (1, 1)
    assert list(paths.requests.glob("*.json")) == [paths.requests / f"{rid}.reply.json"]


def test_a_create_that_runs_out_of_space_leaves_nothing_and_says_why(
    tmp_path: Path, state_fs: Path
) -> None:
    paths = StatePaths(state_fs)
    daemon = Daemon(paths, ClusterConfig(backend="slurm"), FakeSlurm())
    staging = paths.requests / "one.context"
    snapshot(EXAMPLES, staging)
    filler = fill(state_fs)
    with pytest.raises(DiskFullError, match=r"experiment not created: no space left on device "
                       r"while writing experiment 1 in .*; free space"):
        daemon.handle("create", {"config": CONFIG, "staging": str(staging)})
    assert _experiments(paths) == []
    assert daemon.store.experiments() == []

    filler.unlink()
    snapshot(EXAMPLES, staging)
    result = daemon.handle("create", {"config": CONFIG, "staging": str(staging)})
    assert result["experiment_id"] == 1
    assert _experiments(paths) == ["exp-1"]


def test_a_create_that_runs_out_of_space_at_any_point_leaves_nothing(state_fs: Path) -> None:
    """Free one page more each time: the create fails at each of its writes in turn (the
    context, experiment.json, the journal, the database, the searcher's entries) and leaves
    nothing, until it has room and succeeds whole."""
    paths = StatePaths(state_fs)
    daemon = Daemon(paths, ClusterConfig(backend="slurm"), FakeSlurm())
    staging = paths.requests / "one.context"
    page = os.sysconf("SC_PAGE_SIZE")
    for pages in range(200):
        shutil.rmtree(staging, ignore_errors=True)
        snapshot(EXAMPLES, staging)
        filler = fill(state_fs)
        os.truncate(filler, filler.stat().st_size - pages * page)
        try:
            result = daemon.handle("create", {"config": CONFIG, "staging": str(staging)})
        except DiskFullError as e:
            assert "experiment not created: " in str(e)
            assert _experiments(paths) == [], pages
            assert daemon.store.experiments() == [], pages
            assert daemon.store.trials() == [], pages
            continue
        finally:
            filler.unlink()
        break
    assert pages > 2, "the create never ran out of space"
    assert result["experiment_id"] == 1
    assert [t.id for t in daemon.store.trials(1)] == [1]
    assert read_json(paths.experiment(1) / "experiment.json")["id"] == 1
    if result["warning"]:  # created, but no room left to submit its trial: the next tick does
        assert "its trials wait to be submitted: no space left on device" in result["warning"]
        _tick(daemon)
    assert [r.job_id for r in daemon.store.runs()] == ["101"]


def test_a_request_that_runs_out_of_space_is_answered_with_why_once_there_is_room(
    state_fs: Path,
) -> None:
    paths = StatePaths(state_fs)
    daemon = Daemon(paths, ClusterConfig(backend="slurm"), FakeSlurm())
    staging = paths.requests / "one.context"
    snapshot(EXAMPLES, staging)
    daemon.handle("create", {"config": CONFIG, "staging": str(staging)})
    rid = calls.submit(paths, "pause", {"exp_id": 1})
    filler = fill(state_fs)
    _tick(daemon)
    _tick(daemon)
    filler.unlink()
    _tick(daemon)
    reply = read_json(paths.requests / f"{rid}.reply.json")
    assert not reply["ok"]
    assert reply["error"].startswith("no space left on device while writing "), reply
    assert daemon.journal.replay(1) == 0, "the failed pause was left in the journal"
    assert daemon.store.experiment(1).state == "ACTIVE"


def test_a_create_answered_by_the_next_daemon_is_the_same_experiment(
    tmp_path: Path, requests_fs: Path
) -> None:
    """The daemon that carried out the create dies with its reply unwritten; the next one
    answers the request with that experiment instead of creating another or failing."""
    paths = StatePaths(tmp_path / "state")
    daemon = Daemon(paths, ClusterConfig(backend="slurm"), FakeSlurm())
    staging = tmp_path / "staging"
    snapshot(EXAMPLES, staging)
    rid = calls.new_request_id()
    calls.submit(
        paths, "create", {"config": CONFIG, "staging": str(staging), "request_id": rid}, rid)
    filler = fill(requests_fs)
    _tick(daemon)
    assert _experiments(paths) == ["exp-1"]

    req._kept.clear()  # what a daemon that dies forgets
    daemon = Daemon(paths, ClusterConfig(backend="slurm"), FakeSlurm())
    filler.unlink()
    _tick(daemon)
    reply = read_json(paths.requests / f"{rid}.reply.json")
    assert reply["ok"], reply
    assert reply["result"]["experiment_id"] == 1
    assert reply["result"]["trial_ids"] == [1]
    assert _experiments(paths) == ["exp-1"]
