"""Ids out of SQLite's range or not numbers at all are refused where the CLI parses them, and
again where the daemon takes a request, with a message instead of a traceback."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpcdet.cli.main import app
from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.loop import Daemon
from hpcdet.errors import NotFoundError, UsageError
from hpcdet.paths import StatePaths
from hpcdet.schedulers.runner import CommandRunner, Result
from hpcdet.store.repository import Store


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StatePaths:
    paths = StatePaths(tmp_path / "state")
    monkeypatch.setenv("HPCDET_HOME", str(paths.root))
    (tmp_path / "cluster.yaml").write_text("backend: local\n")
    monkeypatch.setenv("HPCDET_CLUSTER_CONFIG", str(tmp_path / "cluster.yaml"))
    Store(paths.database()).close()  # an empty database: reads work, no daemon is started
    return paths


@pytest.mark.parametrize("command", [
    "experiment describe", "experiment pause", "experiment kill", "experiment continue",
    "trial logs", "trial metrics", "trial continue", "checkpoint list",
])
@pytest.mark.parametrize("value", ["99999999999999999999", "9223372036854775808", "0", "x1"])
def test_an_id_out_of_range_is_a_usage_error(state: StatePaths, command: str, value: str) -> None:
    result = CliRunner().invoke(app, [*command.split(), value])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.replace("│", " ").split())  # rich wraps it in a box
    assert "ids are whole numbers from 1 to 9223372036854775807" in said
    assert isinstance(result.exception, SystemExit)


def test_the_largest_id_is_looked_up(state: StatePaths) -> None:
    result = CliRunner().invoke(app, ["experiment", "describe", "9223372036854775807"])
    assert isinstance(result.exception, NotFoundError)


class NoSlurm(CommandRunner):
    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        return Result("", "", 0)


@pytest.mark.parametrize(("op", "key"), [("pause", "exp_id"), ("cancel", "exp_id"),
                                          ("continue", "exp_id"),
                                          ("continue_trial", "trial_id")])
@pytest.mark.parametrize("value", [2**63, -1, "7", 1.5, None, True])
def test_the_daemon_refuses_a_request_with_a_bad_id(
    tmp_path: Path, op: str, key: str, value: object
) -> None:
    daemon = Daemon(StatePaths(tmp_path), ClusterConfig(backend="slurm"), NoSlurm())
    with pytest.raises(UsageError, match=f"{key}: ids are whole numbers"):
        daemon.handle(op, {key: value})
    with pytest.raises(NotFoundError):
        daemon.handle(op, {key: 2**63 - 1})


@pytest.mark.parametrize("value", ["../x", "a.reply", "", "-x", "a" * 81, "a b"])
def test_a_request_id_that_could_name_another_file_is_refused(
        state: StatePaths, tmp_path: Path, value: str) -> None:
    """The laptop's request id becomes file names in the request area."""
    (tmp_path / "c.yaml").write_text("entrypoint: python3 train.py\n")
    result = CliRunner().invoke(app, ["e", "create", str(tmp_path / "c.yaml"), str(tmp_path),
                                      f"--request-id={value}"])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.replace("│", " ").split())
    assert "1 to 80 letters, digits" in said
    assert not state.requests.exists() or not any(state.requests.iterdir())
