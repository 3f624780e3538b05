"""Which commands run on the laptop, and the login node's command line for the others."""

from __future__ import annotations

import shlex

import pytest

from hpcdet.remote.forward import remote_command, runs_on_laptop, split_cluster


@pytest.mark.parametrize(("argv", "name", "rest"), [
    (["-c", "big", "e", "list"], "big", ["e", "list"]),
    (["e", "list", "--cluster", "big"], "big", ["e", "list"]),
    (["--cluster=big", "e", "list"], "big", ["e", "list"]),
    (["-cbig", "ui"], "big", ["ui"]),
    (["e", "list"], None, ["e", "list"]),
    (["t", "logs", "1", "--", "-c", "x"], None, ["t", "logs", "1", "--", "-c", "x"]),
])
def test_split_cluster(argv: list[str], name: str | None, rest: list[str]) -> None:
    assert split_cluster(argv) == (name, rest)


@pytest.mark.parametrize(("argv", "here"), [
    (["cluster", "add", "x", "--ssh", "h"], True), (["cluster", "list"], True),
    (["cluster", "use", "x"], True), (["cluster", "remove", "x"], True),
    (["cluster", "trust", "x"], True), (["cluster", "--help"], True),
    (["cluster", "add", "--help"], True), (["version"], True), (["--version"], True),
    ([], True), (["--help"], True),
    (["cluster", "show"], False), (["e", "list"], False), (["e", "--help"], False),
    (["ui"], False), (["daemon", "status"], False),
])
def test_runs_on_laptop(argv: list[str], here: bool) -> None:
    assert runs_on_laptop(argv) is here


def test_every_argument_reaches_the_login_node_as_one_word() -> None:
    argv = ["e", "create", "c fg.yaml", "$(touch /tmp/x)", "a;b", "'q'", "--config", "x=1 2"]
    line = remote_command("hpcdet", argv)
    assert shlex.split(line) == ["hpcdet", *argv]
    assert remote_command("~/venv/bin/hpcdet", ["version"]) == '"$HOME"/venv/bin/hpcdet version'
    assert remote_command("'/opt/my tools/hpcdet'", []) == "'/opt/my tools/hpcdet'"


@pytest.mark.parametrize(("argv", "fetched"), [
    (["c", "download", "uuid"], True),
    (["trial", "download", "3", "--latest"], True),
    (["e", "download", "1", "-o", "x"], True),
    (["experiment", "download"], True),
    (["model", "download", "mnist", "--version", "2"], True),
    (["model", "describe", "mnist"], False),
    (["j", "download"], False),
    (["e", "list"], False),
    (["download"], False),
    (["checkpoint", "list", "1"], False),
])
def test_the_downloads_are_known(argv: list[str], fetched: bool) -> None:
    from hpcdet.remote.forward import is_download

    assert is_download(argv) is fetched


@pytest.mark.parametrize(("argv", "grows"), [
    (["t", "logs", "-f", "3"], True), (["experiment", "logs", "1"], True),
    (["e", "list"], False), (["t", "describe", "1"], False), (["logs"], False),
])
def test_only_logs_resume_after_a_cut(argv: list[str], grows: bool) -> None:
    from hpcdet.remote.forward import output_only_grows

    assert output_only_grows(argv) is grows
