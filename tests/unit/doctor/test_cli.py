"""`hpcdet doctor`'s output on the local backend (no batch system: the login-node checks
only): the table, the JSON and the exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpcdet.cli.main import app


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cluster: str, *args: str
         ) -> tuple[int, str]:
    (tmp_path / "cluster.yaml").write_text(cluster)
    (tmp_path / "site.yaml").write_text("{}\n")
    monkeypatch.setenv("HPCDET_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HPCDET_CLUSTER_CONFIG", str(tmp_path / "cluster.yaml"))
    monkeypatch.setenv("HPCDET_SITE_CONFIG", str(tmp_path / "site.yaml"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no container runtime here
    result = CliRunner().invoke(app, ["doctor", *args])
    return result.exit_code, result.output


def test_local_backend_table_warns_of_the_default_runtime_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = _run(tmp_path, monkeypatch, "backend: local\n")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "hpcdet doctor"
    assert any(line.startswith("backend ") and "| ok " in line and "trials run on this "
               "machine" in line for line in lines)
    assert any(line.startswith("container runtime") and "| warn " in line for line in lines)
    assert lines[-1] == "no check failed"


def test_a_runtime_the_cluster_file_names_but_is_missing_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = _run(tmp_path, monkeypatch, "backend: local\ncontainer_runtime: enroot\n",
                     "--json")
    assert code == 1
    found = json.loads(out)
    assert found["ok"] is False
    assert found["findings"][1] == {
        "check": "container runtime", "status": "fail", "seen": "enroot not found on PATH",
        "change": "install enroot or load its module, or set container_runtime: in "
                  "cluster.yaml to one this site has; experiments without environment.image "
                  "need none"}
