"""What the harness tells the daemon when the container runtime fails before the trial starts:
the runtime's own message line, as a launch failure (the trial ends at once); a failure after
the container's first command ran is the trial's exit code. The runtime here is a stand-in
process on PATH (the real runtimes run in the container end-to-end tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hpcdet.containers import ContainerSpec, Image
from hpcdet.private import hpcdet_command
from hpcdet.rundir import layout
from hpcdet.rundir.spec import RunSpec

NO_IMAGE = ('Error: initializing source docker://localhost/nope:1: pinging container registry '
            'localhost: Get "https://localhost/v2/": dial tcp [::1]:443: connect: connection '
            'refused')
FAILS = f"""#!/bin/sh
echo 'Trying to pull localhost/nope:1...' >&2
echo '{NO_IMAGE}' >&2
exit 125
"""
# Runs what comes after the image, as a runtime would in the container.
RUNS = """#!/bin/sh
while [ "$1" != localhost/nope:1 ]; do shift; done
shift
exec "$@"
"""


def _harness(root: Path, runtime_script: str, entrypoint: str) -> Path:
    bin_dir, run_dir, context, trialside = (root / d for d in ("bin", "run", "ctx", "ts"))
    for d in (bin_dir, context, trialside):
        d.mkdir(parents=True)
    (bin_dir / "podman").write_text(runtime_script)
    (bin_dir / "podman").chmod(0o755)
    spec = ContainerSpec("podman", Image("localhost/nope:1", "localhost/nope:1"))
    RunSpec(
        experiment_id=1, trial_id=1, run_id=1, trial_seed=0, hparams={}, config={},
        entrypoint=entrypoint, context_dir=str(context), run_dir=str(run_dir),
        checkpoint_dir=str(root / "ckpt"), python="python3", trialside=str(trialside),
        container=spec.to_dict(),
    ).save(run_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PBS_"))}
    env["PATH"] = f"{bin_dir}:{os.path.dirname(sys.executable)}:/usr/bin:/bin"
    subprocess.run([*hpcdet_command("hpcdet.launch.harness"), str(run_dir)], env=env,
                   timeout=60, capture_output=True)
    return run_dir


def test_a_runtime_that_fails_to_start_the_container_is_named_with_its_own_words(
        container_root: Path) -> None:
    run_dir = _harness(container_root, FAILS, "echo the entrypoint ran")
    said = layout.launch_failure(run_dir)
    assert said is not None and said.startswith("podman could not start the trial's container")
    assert said.endswith(f"(exit code 125): {NO_IMAGE}"), said
    assert layout.node_exit(run_dir, 0).read_text().strip() == "125"
    log = layout.node_log(run_dir, 0).read_text()
    assert NO_IMAGE in log and said in log and "the entrypoint ran" not in log


def test_a_trial_that_exits_127_in_its_container_is_the_trials_own_failure(
        container_root: Path) -> None:
    run_dir = _harness(container_root, RUNS, "echo the entrypoint ran; exit 127")
    assert layout.node_started(run_dir, 0).exists()
    assert layout.launch_failure(run_dir) is None
    assert layout.node_exit(run_dir, 0).read_text().strip() == "127"
    assert "the entrypoint ran" in layout.node_log(run_dir, 0).read_text()
