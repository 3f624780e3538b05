"""hpcdet installed from a wheel (not the editable tree) runs an experiment end to end."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from tests.support import REPO, Hpcdet


def test_wheel_install_runs_an_experiment(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w",
         str(tmp_path / "dist")], check=True, capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("hpcdet-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        shipped = set(zf.namelist())
    folders = {"hpcdet": "hpcdet", "cli": "hpcdet/cli", "launchers": "hpcdet/launch",
               "templates": "hpcdet/templates"}
    for folder, package in folders.items():
        for source in (REPO / folder).rglob("*"):
            if source.suffix in (".py", ".j2") and "__pycache__" not in source.parts:
                rel = source.relative_to(REPO / folder).as_posix()
                assert f"{package}/{rel}" in shipped, f"{folder}/{rel} is not in the wheel"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True,
                   capture_output=True)
    # The dependencies come from the test environment's site-packages, as a plain path: its
    # .pth files (the editable install's finder among them) are not run, so hpcdet is the wheel.
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], check=True, capture_output=True, text=True)
    (Path(purelib.stdout.strip()) / "test-deps.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "where.py").write_text(
        "import determined, hpcdet\nprint('FROM', hpcdet.__file__)\n"
        "print('SHIM', determined.__file__)\n"
    )
    cfg = tmp_path / "where.yaml"
    cfg.write_text("name: wheel\nentrypoint: python3 where.py\n"
                   "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n")
    h = Hpcdet(tmp_path / "user", "local")
    env = h.env()
    try:
        p = subprocess.run([str(venv / "bin" / "hpcdet"), "experiment", "create", str(cfg),
                            str(ctx), "-f"], env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        # The trial imports hpcdet's trial side from the read-only tree built from the wheel's
        # files, not from the wheel's environment.
        tree = re.search(r"FROM (\S+)/hpcdet/__init__\.py", p.stdout)
        assert tree and Path(tree.group(1)).parent == h.state / "trialside", p.stdout
        assert f"SHIM {tree.group(1)}/determined/__init__.py" in p.stdout, p.stdout
        built = (Path(tree.group(1)) / "hpcdet" / "core" / "__init__.py").read_bytes()
        assert built == next((venv / "lib").glob("python*/site-packages/hpcdet/core/"
                                                 "__init__.py")).read_bytes()
    finally:
        subprocess.run([str(venv / "bin" / "hpcdet"), "daemon", "stop"], env=env,
                       capture_output=True, timeout=60)
