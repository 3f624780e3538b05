"""Trials in an image against the Apptainer double (tests/doubles/apptainer), for what a real
runtime cannot stage here, having no registry: one pull for many jobs, a pull that fails,
images a site converted by pull, and a runtime missing from PATH. What a trial sees in a
container, the tutorial, DDP and MPI in an image run on the real runtimes instead
(tests/runtime_scenarios.py, tests/integration/test_runtimes.py, tests/cluster/test_runtimes.py).
Also here: the MPI launcher over two nodes, which those and tests/cluster/test_slurm_e2e.py
call. Each scenario runs on any backend; the tests choose local or Slurm."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support import IMAGE_PATH, Hpcdet, Images

IMAGE = "python:3.11"

def _config(tmp: Path, name: str, entrypoint: str, extra: str = "",
            image: str = IMAGE) -> Path:
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(f"name: {name}\nentrypoint: {entrypoint}\nmax_restarts: 0\n"
                   f"environment:\n  image: {image}\n{extra}"
                   "searcher: {name: single, metric: x, max_length: 1}\n")
    return cfg


def one_pull_for_a_whole_array(h: Hpcdet, tmp: Path, images: Images, trials: int = 10) -> None:
    """A login node without the runtime: the CLI converts nothing, and the array's tasks,
    starting together, convert the image once between them."""
    h.run("daemon", "start")  # with the double on its PATH, as the compute nodes have it
    images.registry.joinpath("library_python_3.11.json").write_text(
        json.dumps({"env": {"PATH": IMAGE_PATH}}))
    ctx = tmp / "ctx"
    ctx.mkdir(parents=True)
    (ctx / "t.py").write_text(
        "import determined as det\nwith det.core.init() as core:\n"
        "    core.train.report_training_metrics(steps_completed=1, metrics={'x': 1.0})\n")
    cfg = tmp / "array.yaml"
    cfg.write_text(f"name: array\nentrypoint: python3 t.py\nmax_restarts: 0\n"
                   f"environment: {{image: {IMAGE}}}\nhyperparameters:\n"
                   "  lr: {type: double, minval: 0.1, maxval: 1.0}\n"
                   f"searcher: {{name: random, metric: x, max_length: 1, max_trials: {trials},"
                   f" max_concurrent_trials: {trials}}}\n")
    login = {**h.extra_env, **images.env(on_path=False), "PATH": _path_without_apptainer(tmp)}
    saved, h.extra_env = h.extra_env, login
    try:
        out = h.run("experiment", "create", str(cfg), str(ctx)).stdout
    finally:
        h.extra_env = saved
    assert "apptainer is not on PATH here: the first job converts" in out, out
    exp = int(out.split("Created experiment ")[1].split()[0])
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=300)
    assert [t["state"] for t in d["trials"]] == ["COMPLETED"] * trials, d["trials"]
    assert len({r["job_id"].split("_")[0].split("[")[0] for r in d["runs"]}) == 1, d["runs"]
    assert len(images.calls("pull")) == 1, images.calls("pull")
    assert len(images.calls("exec")) == trials


def _path_without_apptainer(tmp: Path) -> str:
    """A PATH with what this one holds but Apptainer and Singularity (the test machines have
    the real Apptainer in /usr/bin): a login node without the runtime."""
    login = tmp / "login-bin"
    login.mkdir(parents=True)
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            if name not in ("apptainer", "singularity") and not (login / name).is_symlink():
                (login / name).symlink_to(Path(directory) / name)
    return str(login)


def errors_a_user_can_act_on(h: Hpcdet, tmp: Path, images: Images) -> None:
    """A failed pull and a missing runtime each end the trial (no restart, no hang) with what
    to do, in `experiment describe` and in the trial's logs (a missing image: on the real
    runtimes, tests/runtime_scenarios.py)."""
    ctx = tmp / "ctx"
    ctx.mkdir(parents=True)
    (ctx / "t.py").write_text("print('the entrypoint ran')\n")

    def ended(cfg: Path, *said: str) -> None:
        made = h.run("experiment", "create", str(cfg), str(ctx), check=False)
        exp = int(made.stdout.split("Created experiment ")[1].split()[0])
        d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=120)
        trial = d["trials"][0]
        assert (d["experiment"]["state"], trial["state"]) == ("ERROR", "ERROR"), d
        described = h.run("experiment", "describe", str(exp)).stdout
        logs = h.run("trial", "logs", str(trial["id"])).stdout
        for text in said:
            assert text in trial["end_reason"] and text in logs, (text, trial, logs)
            assert text.split(":")[0] in described
        assert "the entrypoint ran" not in logs
        assert len(d["runs"]) == 1  # not restarted

    failed = _config(tmp, "failed-pull", "python3 t.py", image="nosuch/thing:1")
    ended(failed, "pulling docker://nosuch/thing:1 failed (exit code 255)",
          "requested access to the resource is denied")
    made = h.run("experiment", "create", str(failed), str(ctx), check=False)
    assert made.returncode == 1 and "pulling docker://nosuch/thing:1 failed" in made.stderr
    (h.root / "cluster.yaml").write_text(f"backend: {h.backend}\ncontainer_runtime: enroot\n")
    h.run("daemon", "stop")
    ended(_config(tmp, "no-runtime", "python3 t.py"),
          "the container runtime 'enroot' is not on PATH", "module load enroot")


MPI_TRIAL = """\
import os, socket
import determined as det

dist = det.core.DistributedContext.from_mpi4py()
with det.core.init(distributed=dist) as core:
    ranks = dist.allgather(dist.rank)
    print(f"[rank={dist.rank}] host={socket.gethostname()} allgather={ranks}"
          f" image={os.environ.get('APPTAINER_CONTAINER', '-')}", flush=True)
    if dist.rank == 0:
        core.train.report_training_metrics(steps_completed=1, metrics={"x": float(sum(ranks))})
"""


def mpi_over_two_nodes(h: Hpcdet, tmp: Path) -> str:
    """hpcdet's MPI launcher, 4 ranks over 2 nodes; in an image (``h.create_overrides``) the
    step starts on the host through the harness and every rank runs in the image."""
    ctx = tmp / "ctx"
    ctx.mkdir(parents=True)
    (ctx / "mpi_trial.py").write_text(MPI_TRIAL)
    cfg = tmp / "mpi.yaml"
    cfg.write_text("name: mpi\nentrypoint: python3 -m hpcdet.launch.mpi python3 mpi_trial.py"
                   "\nresources: {slots_per_trial: 4}\nslurm: {slots_per_node: 2}\n"
                   "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n")
    out = h.run("experiment", "create", str(cfg), str(ctx), "-f", timeout=300).stdout
    d = h.describe(int(out.split("Created experiment ")[1].split()[0]))
    assert d["experiment"]["state"] == "COMPLETED", (d, out[-3000:])
    lines = [line for line in out.splitlines() if "[rank=" in line]
    assert len(lines) == 4 and all("allgather=[0, 1, 2, 3]" in line for line in lines), out
    assert {line.split("host=")[1].split()[0] for line in lines} == {"node1", "node2"}
    return out


def site_images_are_used_as_they_are(h: Hpcdet, tmp: Path, images: Images) -> None:
    """An image the site converted into its read-only image_dir runs without a pull."""
    import subprocess

    site = tmp / "site-images"
    site.mkdir(parents=True)
    env = {**os.environ, **images.env()}
    subprocess.run(["apptainer", "pull", str(site / "python+3.11.sif"), "docker://python:3.11"],
                   env=env, check=True, capture_output=True)
    site.chmod(0o555)
    (h.root / "cluster.yaml").write_text(f"backend: {h.backend}\nimage_dir: {site}\n")
    ctx = tmp / "ctx"
    ctx.mkdir(parents=True)
    (ctx / "t.py").write_text("print('ran in', __import__('os').environ['APPTAINER_CONTAINER'])\n")
    out = h.run("experiment", "create", str(_config(tmp, "site", "python3 t.py")), str(ctx),
                "-f").stdout
    assert f"ran in {site / 'python+3.11.sif'}" in out, out
    assert "converting" not in out
    assert len(images.calls("pull")) == 1  # the site's own
