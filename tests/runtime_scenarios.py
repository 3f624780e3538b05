"""Trials in an image on the real runtimes (Apptainer, Podman, Docker; tests/runtimes.py): what
reaches the trial, whose files it writes, pausing and resuming from a checkpoint written
inside, and the failures a user acts on. Each scenario runs on any backend."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path
from typing import Any

from tests import scenarios
from tests.runtimes import Runtime
from tests.support import Hpcdet

PROBE = """\
import json, os, pathlib
import determined as det

def writable(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        return True
    except OSError:
        return False

facts = {
    "uid": os.getuid(), "weird": os.environ.get("WEIRD"), "lines": os.environ.get("LINES_"),
    "data": open("/data/hello.txt").read(), "data_writable": writable("/data/x"),
    "hook_saw": open("/out/hook-saw").read(), "cwd": os.getcwd(),
    "home_writable": writable(os.path.join(os.environ.get("HOME", "/"), ".probe")),
    "tmp": sorted(os.listdir("/tmp")),
}
pathlib.Path("/out/from-trial.txt").write_text("written in the container")
with det.core.init() as core:
    with core.checkpoint.store_path({"steps_completed": 1}) as (path, storage_id):
        (path / "weights").write_text("w")
    core.train.report_training_metrics(steps_completed=1, metrics={"x": 1.0})
print("FACTS", json.dumps(facts), flush=True)
"""
# Sourced by bash in the container before the entrypoint, as Determined does.
HOOK = 'printf "%s" "$WEIRD" > /out/hook-saw\n'
# Commas (Apptainer's --env splits on them), quotes, a `$` (Apptainer evaluates values in a
# shell unless told not to) and a newline: each must reach the trial as written.
WEIRD = 'a,b=c "double" \'single\' $HOME ${PATH} `id` \\ end'
LINES = "first line\nsecond line"


def _facts(out: str) -> dict[str, Any]:
    line = next(line for line in out.splitlines() if "FACTS " in line)
    facts: dict[str, Any] = json.loads(line.split("FACTS ", 1)[1])
    return facts


def what_reaches_the_trial(h: Hpcdet, rt: Runtime, tmp: Path) -> None:
    """A read-only and a read-write bind, variables with every awkward character, a startup
    hook: all reach the trial as written; what it writes to the bind and to checkpoint
    storage is the user's (not root's, not a sub-uid's)."""
    rt.configure(h)
    uid = os.getuid() if h.user is None else pwd.getpwnam(h.user).pw_uid
    data = h.mkdir(tmp / "data")
    (data / "hello.txt").write_text("hello from the host\n")
    out_dir = h.mkdir(tmp / "out")
    ctx = h.mkdir(tmp / "ctx")
    (ctx / "probe.py").write_text(PROBE)
    (ctx / "startup-hook.sh").write_text(HOOK)
    cfg = tmp / "probe.yaml"
    cfg.write_text(json.dumps({
        "name": f"probe-{rt.id}", "entrypoint": "python3 probe.py", "max_restarts": 0,
        "environment": {"image": rt.image,
                        "environment_variables": [f"WEIRD={WEIRD}", f"LINES_={LINES}"]},
        "bind_mounts": [
            {"host_path": str(data), "container_path": "/data", "read_only": True},
            {"host_path": str(out_dir), "container_path": "/out"}],
        "searcher": {"name": "single", "metric": "x", "max_length": 1}}))
    out = h.run("experiment", "create", str(cfg), str(ctx), "-f", timeout=300).stdout
    d = h.describe(int(out.split("Created experiment ")[1].split()[0]))
    assert d["experiment"]["state"] == "COMPLETED", (d, out[-3000:])
    facts = _facts(out)
    assert facts["weird"] == WEIRD and facts["hook_saw"] == WEIRD, facts
    assert facts["lines"] == LINES, facts
    assert facts["data"] == "hello from the host\n" and not facts["data_writable"]
    assert facts["uid"] == (uid if rt.name != "podman" or rt.rootless or uid else 0), facts
    assert facts["home_writable"], facts
    written = [out_dir / "from-trial.txt", out_dir / "hook-saw"]
    checkpoints = list((h.state / "checkpoints").rglob("*"))
    assert any(p.name == "weights" for p in checkpoints), checkpoints
    owners = {str(p): (p.stat().st_uid) for p in written + checkpoints}
    assert set(owners.values()) == {uid}, owners


def pause_and_resume(h: Hpcdet, rt: Runtime, tmp: Path) -> None:
    """Tutorial stage 2 paused mid-run and resumed: the second run restores the checkpoint
    the first wrote inside the container."""
    rt.configure(h)
    h.create_overrides = [f"environment.image={rt.image}"]
    scenarios.pause_activate(h, h.mkdir(tmp / "pause"))


def tutorial(h: Hpcdet, rt: Runtime, tmp: Path) -> None:
    """Stages 1 and 2 of the Core API tutorial, unchanged, in the image."""
    rt.configure(h)
    h.create_overrides = [f"environment.image={rt.image}"]
    scenarios.stage1(h, h.mkdir(tmp / "s1"))
    scenarios.stage2(h, h.mkdir(tmp / "s2"))


def failures_end_the_trial_at_once(h: Hpcdet, rt: Runtime, tmp: Path) -> None:
    """A missing image and a missing command each end the trial (no restart, no hang) with
    the runtime's own words in `experiment describe`."""
    rt.configure(h)
    ctx = h.mkdir(tmp / "ctx")
    (ctx / "t.py").write_text("print('the entrypoint ran')\n")
    missing = (str(tmp / "images" / "gone.sif") if rt.name == "apptainer"
               else "localhost/hpcdet-no-such-image:1")

    def ended(name: str, image: str, entrypoint: str) -> str:
        cfg = tmp / f"{name}.yaml"
        cfg.write_text(json.dumps({
            "name": name, "entrypoint": entrypoint, "max_restarts": 1,
            "environment": {"image": image},
            "searcher": {"name": "single", "metric": "x", "max_length": 1}}))
        made = h.run("experiment", "create", str(cfg), str(ctx), check=False)
        assert "Created experiment " in made.stdout, made.stdout + made.stderr
        exp = int(made.stdout.split("Created experiment ")[1].split()[0])
        d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=120)
        trial = d["trials"][0]
        assert (d["experiment"]["state"], trial["state"]) == ("ERROR", "ERROR"), d
        assert len(d["runs"]) == 1, d["runs"]  # the runtime's failure is not retried
        logs = h.run("trial", "logs", str(trial["id"])).stdout
        assert "the entrypoint ran" not in logs
        described = h.run("experiment", "describe", str(exp)).stdout
        reason: str = trial["end_reason"]
        assert reason.split("\n")[0][:40] in described, (reason, described)
        return reason

    reason = ended("missing-image", missing, "python3 t.py")
    # A missing image file hpcdet finds before the runtime does; one that is not an image
    # only Apptainer can tell.
    assert {"apptainer": "does not exist", "podman": "hpcdet-no-such-image",
            "docker": "hpcdet-no-such-image"}[rt.name] in reason, reason
    if rt.name == "apptainer":
        reason = ended("not-an-image", str(ctx / "t.py"), "python3 t.py")
        assert "FATAL:" in reason and "image format not recognized" in reason, reason
    reason = ended("missing-command", rt.image, "hpcdet-no-such-command --flag")
    assert "hpcdet-no-such-command" in reason and "not found" in reason, reason


def torch_in_apptainer(h: Hpcdet, torch_root: Path) -> list[str]:
    """Overrides that give the base image torch and mpi4py: ``torch_root``'s lib/ (a copy of
    the test venv's, for the same Python 3.11) bound read-only, on the image's PYTHONPATH."""
    from tests.runtimes import Runtime

    rt = Runtime("apptainer")
    rt.configure(h)
    site = next(torch_root.glob("lib/python3*/site-packages")).relative_to(torch_root)
    return [f"environment.image={rt.image}",
            f"bind_mounts=[{{host_path: {torch_root}, container_path: /opt/torch, "
            "read_only: true}]",
            f"environment.environment_variables=[PYTHONPATH=/opt/torch/{site}, "
            "MPI4PY_LIBMPI=/opt/torch/lib/libmpi.so.12]"]


def killed_trial_leaves_no_container(h: Hpcdet, rt: Runtime, tmp: Path) -> None:
    """`experiment kill` of a trial in Podman or Docker stops its container: the runtime's
    daemon (conmon, dockerd) runs it, not the job, so a container whose PID 1 ignored the
    SIGTERM would outlive the job."""
    import subprocess
    import time

    rt.configure(h)
    ctx = h.mkdir(tmp / "ctx")
    (ctx / "sleeper.py").write_text(
        "import time\nprint('sleeping', flush=True)\ntime.sleep(300)\n")
    cfg = tmp / "sleeper.yaml"
    name = f"sleeper-{time.time_ns()}"
    cfg.write_text(json.dumps({
        "name": name, "entrypoint": "python3 sleeper.py", "max_restarts": 0,
        "environment": {"image": rt.image, "environment_variables": [f"SLEEPER={name}"]},
        "searcher": {"name": "single", "metric": "x", "max_length": 1}}))
    exp = h.create(cfg, ctx)

    def containers() -> list[str]:
        listed = subprocess.run([rt.name, "ps", "-q", "--filter", f"ancestor={rt.image}"],
                                capture_output=True, text=True, check=True, timeout=60)
        ids = listed.stdout.split()
        if not ids:
            return []
        env = subprocess.run([rt.name, "inspect", "--format", "{{.Config.Env}}", *ids],
                             capture_output=True, text=True, check=False, timeout=60).stdout
        return [line for line in env.splitlines() if f"SLEEPER={name}" in line]

    h.wait_for("the trial's container", lambda: bool(containers()), timeout=120)
    h.run("experiment", "kill", str(exp))
    h.wait_state(exp, {"CANCELED", "ERROR", "COMPLETED"}, timeout=120)
    h.wait_for("the container to stop", lambda: not containers(), timeout=60)
