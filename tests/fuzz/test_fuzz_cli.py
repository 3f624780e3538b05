"""Property: no command line ends in a traceback. The typer app runs in-process with
generated arguments (ids huge, negative, non-numeric or unicode; control characters; flags in
any order) against a state directory with one experiment, where reads work. Requests stop at
the daemon's door: a stand-in for ``hpcdet.link.files.call`` checks that every id the CLI
lets through is one SQLite can hold, and answers; the daemon's own checks are tested in
tests/unit/cli/test_ids.py."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hpcdet.cli.main import app
from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.loop import Daemon
from hpcdet.errors import HpcdetError
from hpcdet.ids import id_problem
from hpcdet.link import files as client_files
from hpcdet.paths import StatePaths
from hpcdet.rundir.layout import EVENTS_FILE
from hpcdet.schedulers.runner import CommandRunner, Result
from hpcdet.search.base import Initialize
from hpcdet.store.entries import ExperimentCreated, RunSubmitted, RunSubmitting


class NoSlurm(CommandRunner):
    def run(self, cmd: Sequence[str], check: bool = True, stdin: str | None = None,
            cwd: Path | None = None) -> Result:
        return Result("", "", 0)


def _answer(paths: StatePaths, op: str, args: dict[str, Any], timeout: float | None = None,
            request_id: str | None = None) -> Any:
    for key, value in args.items():
        if key.endswith("_id"):
            assert id_problem(value) is None, f"the CLI sent {op} {key}={value!r}"
    if op in ("create", "continue_trial"):
        return {"experiment_id": 1, "trial_ids": [1], "warning": ""}
    return "done"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A state directory with experiment 1, its trial 1, a metric and a checkpoint."""
    root = tmp_path_factory.mktemp("cli-fuzz")
    paths = StatePaths(root / "state")
    (root / "cluster.yaml").write_text("backend: local\n")
    (root / "site.yaml").write_text("{}\n")
    config = {"name": "x", "entrypoint": "python3 train.py",
              "searcher": {"name": "single", "metric": "loss", "max_length": 1}}
    (root / "exp.yaml").write_text(json.dumps(config))
    (root / "ctx").mkdir()
    (root / "ctx" / "train.py").write_text("print(1)\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCDET_HOME", str(paths.root))
        mp.setenv("HPCDET_CLUSTER_CONFIG", str(root / "cluster.yaml"))
        mp.setenv("HPCDET_SITE_CONFIG", str(root / "site.yaml"))
        mp.setattr(client_files, "call", _answer)
        daemon = Daemon(paths, ClusterConfig(backend="slurm"), NoSlurm())
        daemon.journal.record(1, ExperimentCreated(name="x", config=config,
                              backend="slurm", searcher="single"))
        exp = daemon.store.experiment(1)
        daemon.search.feed(exp, daemon.configs.get(exp), Initialize(), None)
        daemon.journal.record(1, RunSubmitting(trial_id=1, run_id=1))
        daemon.journal.record(1, RunSubmitted(trial_id=1, run_id=1, job_id="101"))
        paths.run(1, 1, 1).mkdir(parents=True)
        (paths.run(1, 1, 1) / EVENTS_FILE).write_text(
            '{"seq":1,"type":"metrics","time":1.0,"group":"validation","steps_completed":1,'
            '"metrics":{"loss":0.5}}\n'
            '{"seq":2,"type":"checkpoint","time":1.0,"uuid":"c1","steps_completed":1}\n')
        daemon.reconcile()
        daemon.store.close()
        yield root


COMMANDS = [
    [], ["experiment"], ["e"], ["nope"], ["experiment", "list"], ["experiment", "describe"],
    ["e", "describe"], ["experiment", "pause"], ["experiment", "activate"],
    ["experiment", "kill"], ["experiment", "cancel"], ["experiment", "continue"],
    ["experiment", "create"], ["trial", "logs"], ["trial", "metrics"], ["t", "metrics"],
    ["trial", "continue"], ["checkpoint", "list"], ["checkpoint", "delete"],
    ["checkpoint", "download"], ["job", "list"], ["job", "update"], ["job", "update-batch"],
    ["daemon", "status"], ["cluster", "show"], ["version"], ["e", "ls"], ["e", "config"],
    ["e", "lt"], ["e", "lc"], ["e", "logs"], ["e", "archive"], ["e", "unarchive"],
    ["e", "label", "add"], ["e", "set", "name"], ["e", "set", "priority"], ["t", "describe"],
    ["t", "kill"], ["c", "describe"], ["j", "ls"], ["j", "u"],
]
IDS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.integers(min_value=2**63 - 2, max_value=2**66).map(str),
    st.sampled_from(["1", "0", "9223372036854775807", "9223372036854775808", "01", " 1",
                     "1e3", "0x10", "١", "½", "1\n", "c1", "1.priority=3", "1.weight=-1",
                     "1.ahead-of=2", "99999999999999999999.priority=1"]),
)
# Never --follow/-f (it waits for the trial to end) nor --output-dir (writes anywhere).
FLAGS = st.sampled_from([
    "--json", "--csv", "--help", "--group", "validation", "--top", "--best", "--priority",
    "-p", "--weight", "-w", "--ahead-of", "--behind-of", "--resource-pool", "--config",
    "searcher.max_length=2", "--quiet", "-q", "--", "-", "--nope", "-x", "--json=1", "-pq",
    "--level", "--head", "--tail", "--rank-id", "--limit", "--offset", "--all", "--label",
    "--yaml", "--reverse", "--metrics", "-h", "-v",
])
TEXT = st.text(max_size=8).filter(lambda t: not t.startswith("-"))


@st.composite
def _argv(draw: st.DrawFn, root: Path) -> list[str]:
    paths = st.sampled_from([str(root / "exp.yaml"), str(root / "ctx"), str(root / "nope"),
                             str(root)])
    command = draw(st.sampled_from(COMMANDS))
    positional = draw(st.lists(st.one_of(IDS, IDS, TEXT, paths), max_size=2))
    flags = draw(st.lists(FLAGS, max_size=3))
    return command + draw(st.permutations(positional + flags))


def _no_traceback(argv: list[str]) -> None:
    result = CliRunner().invoke(app, argv)
    exc = result.exception
    if isinstance(exc, SystemExit):
        assert exc.code in (0, 1, 2), (argv, exc.code, result.output)
    else:
        assert exc is None or isinstance(exc, HpcdetError), (argv, repr(exc), result.output)
    assert "Traceback" not in result.output, (argv, result.output)


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_command_line_ends_in_a_traceback(world: Path, data: st.DataObject) -> None:
    _no_traceback(data.draw(_argv(world)))


# Examples the fuzz reduced on the code before issue 9, kept as found.
@pytest.mark.parametrize("argv", [
    ["experiment", "pause", "0"],  # sent to the daemon as exp_id=0
    ["experiment", "describe", "9223372036854775808"],  # OverflowError from SQLite
    ["trial", "logs", "99999999999999999999"],
    ["trial", "metrics", "--json", "9223372036854775808"],
])
def test_reduced_fuzz_examples(world: Path, argv: list[str]) -> None:
    _no_traceback(argv)
