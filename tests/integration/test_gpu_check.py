"""scripts/gpu-check.sh where there is no GPU (every CI machine): it says so, checks nothing,
and exits 2; with a GPU but no Python that can run the trials, it exits 3. Its checks
themselves need an NVIDIA GPU and are run by hand there."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO

SCRIPT = REPO / "scripts" / "gpu-check.sh"
CHECKS = ("digits", "ddp-nccl", "amp", "container")


def run(path_first: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, **env)
    if path_first is not None:
        full["PATH"] = f"{path_first}{os.pathsep}{full['PATH']}"
    return subprocess.run(["bash", str(SCRIPT)], env=full, capture_output=True, text=True,
                          timeout=120, check=False)


def fake(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def assert_skipped_all(p: subprocess.CompletedProcess[str], code: int, reason: str) -> None:
    assert p.returncode == code, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [["SKIP", c] for c in CHECKS], p.stdout
    assert all(reason in line for line in lines), p.stdout
    assert f"nothing checked: {reason}" in p.stderr


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi")
def test_without_an_nvidia_driver_it_says_so_and_exits_2() -> None:
    assert_skipped_all(run(), 2, "no NVIDIA GPU: nvidia-smi is not installed")


def test_a_driver_that_does_not_answer_is_no_gpu(tmp_path: Path) -> None:
    fake(tmp_path / "bin", "nvidia-smi", "echo 'NVIDIA-SMI has failed because it couldn'\\''t "
         "communicate with the NVIDIA driver.'; exit 9")
    p = run(tmp_path / "bin")
    assert_skipped_all(p, 2, "no NVIDIA GPU: nvidia-smi -L failed: NVIDIA-SMI has failed")


def test_a_gpu_without_torch_is_exit_3(tmp_path: Path) -> None:
    fake(tmp_path / "bin", "nvidia-smi", "echo 'GPU 0: NVIDIA H200 (UUID: GPU-x)'")
    # An interpreter without site-packages: neither torch nor scikit-learn.
    python = fake(tmp_path / "py", "python3", 'exec python3 -S "$@"')
    p = run(tmp_path / "bin", GPU_CHECK_PYTHON=str(python))
    assert_skipped_all(p, 3, f"{python} cannot run the trials: ModuleNotFoundError")
    assert "gpu-check: 1 GPU(s): GPU 0: NVIDIA H200" in p.stderr


def test_the_script_is_clean_bash() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)], check=False).returncode == 0
    shellcheck = shutil.which("shellcheck")
    if shellcheck is not None:
        p = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True,
                           check=False)
        assert p.returncode == 0, p.stdout
