"""The container runtime `hpcdet cluster show` reports: found on PATH or not, and its version,
asked through the command runner and parsed from the runtimes' own words."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcdet.containers import parse_version, version_argvs
from hpcdet.schedulers.runner import CommandRunner
from hpcdet.views.cluster import RuntimeView, runtime_view


@pytest.mark.parametrize(("runtime", "output", "expected"), [
    ("apptainer", "apptainer version 1.4.5\n", "apptainer 1.4.5"),
    ("apptainer", "apptainer version 1.1.9-1.el8\n", "apptainer 1.1.9-1.el8"),
    ("singularity", "singularity-ce version 3.11.4\n", "singularity-ce 3.11.4"),
    ("singularity", "apptainer version 1.4.5\n", "apptainer 1.4.5"),  # Apptainer's symlink
    ("podman", "podman version 4.3.1\n", "podman 4.3.1"),
    ("docker", "20.10.24+dfsg1\n", "docker 20.10.24+dfsg1"),  # the daemon's
    ("docker", "Docker version 28.2.2, build e6534b4\n", "docker 28.2.2"),  # the client's
    ("enroot", "4.1.2\n", "enroot 4.1.2"),
    ("podman", "\n", None),
    ("podman", "Error: something else\n", None),
])
def test_each_runtimes_version_line(runtime: str, output: str, expected: str | None) -> None:
    assert parse_version(runtime, output) == expected


def test_docker_is_asked_for_its_daemons_version_first() -> None:
    assert version_argvs("docker", "/usr/bin/docker") == [
        ["/usr/bin/docker", "version", "--format", "{{.Server.Version}}"],
        ["/usr/bin/docker", "--version"]]
    assert version_argvs("apptainer", "/opt/a/bin/apptainer") == [
        ["/opt/a/bin/apptainer", "--version"]]


def _on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, script: str) -> str:
    """A stand-in ``name`` first on PATH, a real process that answers as ``script`` says."""
    exe = tmp_path / name
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    return str(exe)


def test_a_runtime_found_says_its_version(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    exe = _on_path(tmp_path, monkeypatch, "podman", 'echo "podman version 4.3.1"\n')
    runner = CommandRunner(timeout=30)
    view = runtime_view("podman", runner)
    assert view == RuntimeView("podman", exe, "podman 4.3.1", "")
    assert view.describe() == f"podman 4.3.1 at {exe}"
    assert runner.calls == {"podman": 1}


def test_a_runtime_not_found_is_said_so(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    view = runtime_view("enroot", CommandRunner(timeout=30))
    assert view.describe() == "enroot not found on PATH"


def test_a_docker_whose_daemon_does_not_answer_gives_its_clients_version_and_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    denied = ("permission denied while trying to connect to the Docker daemon socket at "
              "unix:///var/run/docker.sock")
    exe = _on_path(tmp_path, monkeypatch, "docker", f"""\
if [ "$1" = --version ]; then echo "Docker version 28.2.2, build e6534b4"; exit 0; fi
echo "{denied}" >&2
exit 1
""")
    view = runtime_view("docker", CommandRunner(timeout=30))
    assert view.version == "docker 28.2.2"
    assert view.describe() == (f"docker 28.2.2 at {exe}; `version --format "
                               f"{{{{.Server.Version}}}}` exited 1: {denied}")


def test_a_singularity_that_is_apptainer_says_so(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    exe = _on_path(tmp_path, monkeypatch, "singularity", 'echo "apptainer version 1.4.5"\n')
    view = runtime_view("singularity", CommandRunner(timeout=30))
    assert view.describe() == f"singularity (apptainer 1.4.5) at {exe}"
