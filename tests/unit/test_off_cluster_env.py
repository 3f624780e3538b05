"""Issue 43: what `hpcdet local-run` gives the user's command, and that it stays on this
machine with every word of the command kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcdet.remote.forward import runs_on_laptop, split_cluster
from hpcdet.trialside import off_cluster_environment


def test_the_trial_side_goes_first_and_the_cluster_info_goes() -> None:
    env = {"PYTHONPATH": os.pathsep.join(["/a", "/b"]), "HPCDET_CLUSTER_INFO": "/x.json",
           "HOME": "/home/u"}
    out = off_cluster_environment(Path("/t"), env)
    assert out == {"PYTHONPATH": os.pathsep.join(["/t", "/a", "/b"]), "HOME": "/home/u"}
    assert "HPCDET_CLUSTER_INFO" in env  # the caller's mapping is left as it was
    assert off_cluster_environment(Path("/t"), {})["PYTHONPATH"] == "/t"


@pytest.mark.parametrize(("argv", "name", "rest"), [
    (["local-run", "python3", "-c", "x"], None, ["local-run", "python3", "-c", "x"]),
    (["-c", "big", "local-run", "python3", "-c", "x"], "big",
     ["local-run", "python3", "-c", "x"]),
    # Only as the command: a value of another command's option is no cut.
    (["e", "list", "--label", "local-run", "-c", "big"], "big",
     ["e", "list", "--label", "local-run"]),
])
def test_local_run_s_words_are_the_user_s(
    argv: list[str], name: str | None, rest: list[str]
) -> None:
    assert split_cluster(argv) == (name, rest)


@pytest.mark.parametrize("argv", [["local-run", "--", "python3", "t.py"], ["shim-path"],
                                  ["local-run", "--help"]])
def test_off_cluster_commands_run_here(argv: list[str]) -> None:
    assert runs_on_laptop(argv)
