"""Cluster profiles on the laptop: the private file, its errors, and which cluster is chosen."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hpcdet.remote import profiles
from hpcdet.remote.profiles import ProfileError


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(profiles.ENV_CLUSTER, raising=False)
    return tmp_path / "xdg" / "hpcdet" / "clusters.yaml"


def test_add_writes_a_private_file_and_the_first_is_the_default(conf: Path) -> None:
    profiles.add("big", "login", None, False)
    profiles.add("small", "me@small.example", "~/venv/bin/hpcdet", False)
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600
    assert stat.S_IMODE(conf.parent.stat().st_mode) == 0o700
    loaded = profiles.load()
    assert loaded.default == "big"
    assert loaded.clusters["small"] == profiles.Cluster("small", "me@small.example",
                                                        "~/venv/bin/hpcdet")
    assert loaded.clusters["big"].hpcdet == "hpcdet"


def test_choice_option_then_environment_then_default_then_local(
        conf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert profiles.chosen(None) is None  # no file: this machine, as before profiles
    profiles.add("big", "login", None, False)
    profiles.add("small", "small", None, False)
    assert profiles.chosen(None).name == "big"  # type: ignore[union-attr]
    monkeypatch.setenv(profiles.ENV_CLUSTER, "small")
    assert profiles.chosen(None).name == "small"  # type: ignore[union-attr]
    assert profiles.chosen("big").name == "big"  # type: ignore[union-attr]
    assert profiles.chosen("local") is None
    monkeypatch.setenv(profiles.ENV_CLUSTER, "")
    assert profiles.chosen(None) is None
    monkeypatch.delenv(profiles.ENV_CLUSTER)
    profiles.use("small")
    assert profiles.chosen(None).name == "small"  # type: ignore[union-attr]
    profiles.remove("small")
    assert profiles.chosen(None) is None
    with pytest.raises(ProfileError, match="no cluster named 'small'.*cluster add small"):
        profiles.chosen("small")


def test_a_bad_file_names_its_line(conf: Path) -> None:
    conf.parent.mkdir(parents=True)
    conf.write_text("clusters:\n  big:\n    ssh: login\n    shh: typo\n")
    conf.chmod(0o600)
    with pytest.raises(ProfileError, match=r"clusters.yaml \(line 4\).*unknown key 'shh'"):
        profiles.load()
    conf.write_text("clusters:\n  big: [\n")
    with pytest.raises(ProfileError, match=r"line 3.*invalid YAML"):
        profiles.load()
    conf.write_text("default: nope\nclusters:\n  big: {ssh: login}\n")
    with pytest.raises(ProfileError, match=r"line 1.*'nope' is not one of the clusters"):
        profiles.load()


def test_a_file_others_can_change_is_refused(conf: Path) -> None:
    profiles.add("big", "login", None, False)
    os.chmod(conf, 0o622)
    with pytest.raises(ProfileError, match="chmod 600"):
        profiles.load()


@pytest.mark.parametrize("host", ["-oProxyCommand=x", "a b", "", "a\nb"])
def test_a_host_ssh_would_read_as_an_option_is_refused(conf: Path, host: str) -> None:
    with pytest.raises(ProfileError, match="not an SSH host"):
        profiles.add("big", host, None, False)


@pytest.mark.parametrize("name", ["local", "-x", "a/b", ""])
def test_bad_names_are_refused(conf: Path, name: str) -> None:
    with pytest.raises(ProfileError, match="cluster name"):
        profiles.add(name, "login", None, False)
