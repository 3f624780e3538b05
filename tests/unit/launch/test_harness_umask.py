"""The harness applies the umask the run spec carries, so a site's own batch template that sets
none still keeps the trial's logs, cluster info and checkpoints private."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from hpcdet.private import hpcdet_command
from hpcdet.rundir.spec import RunSpec


def _run_harness(tmp_path: Path, umask: int) -> Path:
    run_dir, context = tmp_path / "run", tmp_path / "context"
    context.mkdir()
    RunSpec(
        experiment_id=1, trial_id=1, run_id=1, trial_seed=0, hparams={}, config={},
        entrypoint="echo hello", context_dir=str(context), run_dir=str(run_dir),
        checkpoint_dir=str(tmp_path / "checkpoints"), python=sys.executable, umask=umask,
    ).save(run_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PBS_"))}
    subprocess.run([*hpcdet_command("hpcdet.launch.harness"), str(run_dir)], env=env,
                   check=True, timeout=60, preexec_fn=lambda: os.umask(0o022))
    return run_dir


def _modes(run_dir: Path) -> dict[str, int]:
    written = [p for p in run_dir.rglob("*") if p.is_file() and p.name != "job.json"]
    assert written, "the harness wrote nothing"
    return {str(p.relative_to(run_dir)): stat.S_IMODE(p.stat().st_mode) for p in written}


def test_what_the_harness_writes_is_private_under_an_inherited_umask_022(tmp_path: Path) -> None:
    modes = _modes(_run_harness(tmp_path, 0o077))
    assert {m & 0o077 for m in modes.values()} == {0}, modes


def test_a_group_share_reaches_the_harness(tmp_path: Path) -> None:
    modes = _modes(_run_harness(tmp_path, 0o027))
    assert all(m & 0o040 and not m & 0o007 for m in modes.values()), modes
