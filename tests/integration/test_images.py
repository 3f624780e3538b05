"""Converting an image once for many jobs, against the Apptainer double."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcdet import images
from hpcdet.containers import ContainerSpec, Image, cache_name
from hpcdet.errors import ImageError
from tests.support import REPO

DOUBLE_BIN = REPO / "tests" / "doubles" / "apptainer" / "bin"


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    reg = tmp_path / "registry"
    reg.mkdir()
    (reg / "library_python_3.11.json").write_text(json.dumps({"env": {"IMAGE": "python"}}))
    (reg / "acme_private_1.json").write_text(
        json.dumps({"auth": {"username": "me", "password": "s3cret"}}))
    monkeypatch.setenv("PATH", f"{DOUBLE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HPCDET_APPTAINER_DOUBLE_REGISTRY", str(reg))
    monkeypatch.setenv("HPCDET_APPTAINER_DOUBLE_LOG", str(tmp_path / "calls.jsonl"))
    return reg


def _spec(cache: Path, ref: str = "docker://library/python:3.11",
          auth: dict[str, str] | None = None) -> ContainerSpec:
    return ContainerSpec("apptainer", Image(ref, str(cache / cache_name(ref, "apptainer")), ref),
                         registry_auth=auth or {})


def _pulls(tmp_path: Path) -> list[dict[str, object]]:
    log = tmp_path / "calls.jsonl"
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [c for c in calls if c.get("subcommand") == "pull"]


# What a job's harness does before its trial starts (argv[1]: the ContainerSpec as JSON).
_ENSURE = ("import sys, json; from hpcdet import images; from hpcdet.containers import "
           "ContainerSpec; spec = ContainerSpec.from_dict(json.loads(sys.argv[1])); "
           "print(images.ensure(spec, lambda line: print(line, flush=True)))")


def test_ten_jobs_at_once_share_one_pull(registry: Path, tmp_path: Path) -> None:
    spec = _spec(tmp_path / "cache")
    env = {**os.environ, "HPCDET_APPTAINER_DOUBLE_PULL_SECONDS": "2"}
    procs = [subprocess.Popen([sys.executable, "-c", _ENSURE, json.dumps(spec.to_dict())],
                              env=env, stdout=subprocess.PIPE, text=True) for _ in range(10)]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 10
    assert all(out.strip().endswith(spec.image.file) for out in outs), outs
    assert len(_pulls(tmp_path)) == 1
    assert sum("waiting for" in out for out in outs) >= 1
    assert Path(spec.image.file).read_text().startswith("HPCDET-APPTAINER-DOUBLE-SIF")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [Path(spec.image.file).name]


def test_a_job_that_starts_before_the_cli_converts_waits_for_it(registry: Path,
                                                                  tmp_path: Path) -> None:
    """The daemon takes the pull lock for the CLI before it submits the jobs: a job that starts
    at once waits for the login node's pull, rather than pull on its compute node."""
    spec = _spec(tmp_path / "cache")
    holder = "hpcdet experiment create of experiment 1 on login1"
    assert images.reserve(spec, holder)
    assert not images.reserve(spec, "another create")  # held already
    job = subprocess.Popen([sys.executable, "-c", _ENSURE, json.dumps(spec.to_dict())],
                           stdout=subprocess.PIPE, text=True)
    assert job.stdout is not None
    assert job.stdout.readline().startswith(f"waiting for {holder} to finish converting")
    assert _pulls(tmp_path) == []
    said: list[str] = []
    assert images.ensure(spec, said.append, reserved=holder).exists()
    assert job.communicate(timeout=60)[0].strip() == spec.image.file
    assert job.returncode == 0 and len(_pulls(tmp_path)) == 1
    assert not Path(spec.image.file + ".lock").exists()
    assert not images.reserve(spec, holder)  # nothing left to convert


def test_a_reserved_lock_is_let_go_only_by_its_holder(registry: Path, tmp_path: Path) -> None:
    """A CLI that does not convert (no runtime on the login node) lets the first job do it."""
    spec = _spec(tmp_path / "cache")
    lock = Path(spec.image.file + ".lock")
    assert images.reserve(spec, "create of experiment 1")
    images.release(spec, "create of experiment 2")
    images.release(spec, "")
    assert lock.exists()
    images.release(spec, "create of experiment 1")
    assert not lock.exists()
    assert _pulls(tmp_path) == []


def test_a_failed_pull_says_what_to_do_and_leaves_nothing(registry: Path,
                                                          tmp_path: Path) -> None:
    spec = _spec(tmp_path / "cache", "docker://nosuch/thing:1")
    with pytest.raises(ImageError) as e:
        images.ensure(spec, lambda line: None)
    said = str(e.value)
    assert "pulling docker://nosuch/thing:1 failed (exit code 255)" in said, said
    assert "requested access to the resource is denied" in said
    assert "environment.registry_auth" in said and "apptainer pull" in said
    assert list((tmp_path / "cache").iterdir()) == []


def test_registry_auth_reaches_the_runtimes_own_credential_variables(
        registry: Path, tmp_path: Path) -> None:
    with pytest.raises(ImageError):
        images.ensure(_spec(tmp_path / "c1", "docker://acme/private:1"), lambda line: None)
    spec = _spec(tmp_path / "c2", "docker://acme/private:1", {"username": "me",
                                                              "password": "s3cret"})
    assert images.ensure(spec, lambda line: None).exists()


def test_a_missing_runtime_or_image_is_named(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # A PATH without apptainer: the test machines have a real one in /usr/bin.
    monkeypatch.setenv("PATH", str(tmp_path / "no-runtime-here"))
    spec = _spec(tmp_path / "cache")
    with pytest.raises(ImageError, match="'apptainer' is not on PATH on .*module load apptainer"):
        images.ensure(spec, lambda line: None)
    local = ContainerSpec("apptainer", Image("/sw/gone.sif", "/sw/gone.sif"))
    with pytest.raises(ImageError, match="the image /sw/gone.sif does not exist"):
        images.ensure(local, lambda line: None)


def test_a_lock_whose_holder_died_is_taken_over(registry: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec(tmp_path / "cache")
    lock = Path(spec.image.file + ".lock")
    lock.mkdir(parents=True)
    (lock / "holder").write_text("node9 pid 1\n")
    (lock / "heartbeat").touch()
    old = time.time() - images.STALE_AFTER - 5
    os.utime(lock / "heartbeat", (old, old))
    said: list[str] = []
    assert images.ensure(spec, said.append).exists()
    assert any("taking over the pull lock" in s and "node9 pid 1" in s for s in said), said
    assert not lock.exists()


def test_a_cache_others_can_write_is_refused(registry: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o777)
    cache.chmod(0o777)
    with pytest.raises(ImageError, match="can be written by other users"):
        images.ensure(_spec(cache), lambda line: None)
    assert _pulls(tmp_path) == []
