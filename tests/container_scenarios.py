"""Trials in an image, against the Apptainer double (tests/doubles/apptainer): what the trial
sees inside, the tutorial run in an image, one pull for many jobs, and the errors a user can
act on. Each scenario runs on any backend; the tests choose local or Slurm."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests import scenarios
from tests.support import IMAGE_PATH, IMAGE_PYTHONPATH, REPO, Hpcdet, Images

IMAGE = "python:3.11"

PROBE = """\
import json, os, sys
import determined as det

def writable(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        return True
    except OSError:
        return False

facts = {
    "python": sys.executable, "env": sorted(os.environ), "path": os.environ["PATH"],
    "pythonpath": os.environ["PYTHONPATH"], "det_from": det.__file__,
    "cwd": os.getcwd(), "files": sorted(os.listdir(".")),
    "data": open("/data/hello.txt").read().strip(), "data_writable": writable("/data/x"),
    "tmp": sorted(os.listdir("/tmp")), "tmp_writable": writable("/tmp/scratch"),
    "visible": {p: os.path.exists(p) for p in sys.argv[1:]},
    "cluster_info": det.get_cluster_info() is not None,
}
print("FACTS", json.dumps(facts))
with det.core.init() as core:
    core.train.report_training_metrics(steps_completed=1, metrics={"x": 1.0})
"""

# What apptainer exec --cleanenv sets (apptainer.org, "Environment and Metadata"), and what
# hpcdet passes in by name; nothing else of the job's environment.
RUNTIME_VARS = {"APPTAINER_BIND", "APPTAINER_COMMAND", "APPTAINER_CONTAINER",
                "APPTAINER_ENVIRONMENT", "APPTAINER_NAME", "HOME", "LANG", "LD_LIBRARY_PATH",
                "PATH", "PS1", "PWD", "TERM"}
HPCDET_VARS = {"C10D_PORT", "DET_AGENT_ID", "DET_ALLOCATION_ID", "DET_CHIEF_IP",
               "DET_CLUSTER_ID", "DET_CONTAINER_ID", "DET_EXPERIMENT_CONFIG",
               "DET_EXPERIMENT_ID", "DET_HPARAMS", "DET_RESOURCES_ID", "DET_RESOURCES_TYPE",
               "DET_SLOT_IDS", "DET_STEPS_COMPLETED", "DET_TASK_ID", "DET_TASK_TYPE",
               "DET_TRIAL_ID", "DET_TRIAL_RUN_ID", "DET_TRIAL_SEED", "DET_USER", "DET_USE_TLS",
               "DET_WORKDIR", "HPCDET_CLUSTER_INFO", "HPCDET_IMAGE", "HPCDET_RANK_PREFIX",
               "HPCDET_RUN_DIR",
               "HPCDET_TRIALSIDE",
               "INTER_TRAIN_PROCESS_COMM_PORT_1", "INTER_TRAIN_PROCESS_COMM_PORT_2",
               "PYTHONPATH", "PYTHONUNBUFFERED"}


def _config(tmp: Path, name: str, entrypoint: str, extra: str = "",
            image: str = IMAGE) -> Path:
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(f"name: {name}\nentrypoint: {entrypoint}\nmax_restarts: 0\n"
                   f"environment:\n  image: {image}\n{extra}"
                   "searcher: {name: single, metric: x, max_length: 1}\n")
    return cfg


def inside_the_image(h: Hpcdet, tmp: Path, images: Images, batch_prefix: str) -> dict[str, Any]:
    """The trial sees what `apptainer exec --cleanenv --contain` gives: the image's python and
    PATH, hpcdet's variables and the config's, the batch system's (``batch_prefix``), nothing
    else of the job's environment; the bound /data read-only; a /tmp of its own; none of the
    host's other paths. Returns the facts the trial reported."""
    data = h.mkdir(tmp / "data")
    (data / "hello.txt").write_text("hello from the host\n")
    sentinel = Path("/tmp") / f"hpcdet-host-only-{time.time_ns()}"
    sentinel.write_text("the host's /tmp\n")
    ctx = tmp / "ctx"
    ctx.mkdir(parents=True)
    (ctx / "probe.py").write_text(PROBE)
    unbound = [str(REPO), str(sentinel), str(h.root / "cluster.yaml")]
    cfg = _config(tmp, "probe", json.dumps(["python3", "probe.py", *unbound]),
                  "  environment_variables: [FROM_CONFIG=yes]\n"
                  f"bind_mounts:\n  - {{host_path: {data}, container_path: /data, "
                  "read_only: true}\n")
    try:
        out = h.run("experiment", "create", str(cfg), str(ctx), "-f").stdout
    finally:
        sentinel.unlink()
    assert "converting docker://python:3.11" in out, out
    facts = json.loads(out.split("FACTS ", 1)[1].splitlines()[0])
    assert facts["python"] == "/usr/bin/python3", facts
    assert facts["path"] == IMAGE_PATH
    # hpcdet's trial side first, then the image's own PYTHONPATH.
    trialside, image_part = facts["pythonpath"].split(":")
    assert Path(trialside).parent == h.state / "trialside" and image_part == IMAGE_PYTHONPATH
    assert facts["det_from"] == f"{trialside}/determined/__init__.py"
    assert facts["cwd"] == "/hpcdet/work" and facts["files"] == ["probe.py"]
    assert facts["data"] == "hello from the host" and not facts["data_writable"]
    assert facts["tmp"] == [] and facts["tmp_writable"]
    assert facts["visible"] == dict.fromkeys(unbound, False), facts["visible"]
    assert facts["cluster_info"]
    own = {k for k in facts["env"] if not k.startswith(batch_prefix)} if batch_prefix else set(
        facts["env"])
    assert own - RUNTIME_VARS == HPCDET_VARS | {"FROM_CONFIG"}, sorted(own)
    assert "LEAKY_HOST_VAR" not in facts["env"]
    d = h.describe(1)
    assert d["trials"][0]["state"] == "COMPLETED", d
    assert [m["steps_completed"] for m in h.metrics(d["trials"][0]["id"])] == [1]
    assert len(images.calls("pull")) == 1
    return facts


def tutorial_in_an_image(h: Hpcdet, tmp: Path, images: Images) -> None:
    """Stages 1 to 4 of the Core API tutorial, unchanged, with environment.image set: the
    image's python (no hpcdet in it) imports `determined` from hpcdet's read-only trial side."""
    h.create_overrides = [f"environment.image={IMAGE}"]
    scenarios.stage1(h, tmp / "s1")
    scenarios.stage2(h, tmp / "s2")
    scenarios.asha_v037(h, tmp / "s3")
    scenarios.stage4(h, tmp / "s4")
    execs = images.calls("exec")
    assert execs and all("--cleanenv" in c["argv"] for c in execs)
    assert len(images.calls("pull")) == 1


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
    login = {**h.extra_env, **images.env(on_path=False)}
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


def errors_a_user_can_act_on(h: Hpcdet, tmp: Path, images: Images) -> None:
    """A missing runtime, a missing image and a failed pull each end the trial (no restart,
    no hang) with what to do, in `experiment describe` and in the trial's logs."""
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

    missing = tmp / "images" / "gone.sif"
    ended(_config(tmp, "missing-image", "python3 t.py", image=str(missing)),
          f"the image {missing} does not exist")
    failed = _config(tmp, "failed-pull", "python3 t.py", image="nosuch/thing:1")
    ended(failed, "pulling docker://nosuch/thing:1 failed (exit code 255)",
          "requested access to the resource is denied")
    made = h.run("experiment", "create", str(failed), str(ctx), check=False)
    assert made.returncode == 1 and "pulling docker://nosuch/thing:1 failed" in made.stderr
    (h.root / "cluster.yaml").write_text(f"backend: {h.backend}\ncontainer_runtime: enroot\n")
    h.run("daemon", "stop")
    ended(_config(tmp, "no-runtime", "python3 t.py"),
          "the container runtime 'enroot' is not on PATH", "module load enroot")


def torch_image(images: Images, root: Path) -> str:
    """An image whose python has torch and mpi4py: the files under ``root`` (a copy of a
    venv's lib/), on the image's own PYTHONPATH. Returns its name."""
    site = next(root.glob("lib/python3*/site-packages"))
    images.registry.joinpath("hpcdet_torch_cpu.json").write_text(json.dumps({
        "env": {"PATH": IMAGE_PATH, "PYTHONPATH": str(site),
                "MPI4PY_LIBMPI": str(root / "lib" / "libmpi.so.12")},
        "content": [str(root)]}))
    return "hpcdet/torch:cpu"


def ddp_in_an_image(h: Hpcdet, tmp: Path, images: Images, root: Path) -> None:
    """The DDP example, unchanged, in an image with torch: its Slurm step starts on the host,
    through the harness, and every worker enters the image again."""
    h.create_overrides = [f"environment.image={torch_image(images, root)}"]
    scenarios.ddp(h, tmp, "ddp_determined.yaml")
    execs = images.calls("exec")
    assert all("--cleanenv" in c["argv"] for c in execs), execs
    workers = [c for c in execs if any("hpcdet.launch.node_step" in a for a in c["argv"])]
    assert (len(execs), len(workers)) == (6, 4), execs  # each node's harness, each worker


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


def mpi_over_two_nodes(h: Hpcdet, tmp: Path, images: Images | None = None,
                       root: Path | None = None) -> str:
    """hpcdet's MPI launcher, 4 ranks over 2 nodes; in an image (``root``: its files) the
    step starts on the host through the harness and every rank runs in the image."""
    ctx = tmp / "ctx"
    ctx.mkdir(parents=True)
    (ctx / "mpi_trial.py").write_text(MPI_TRIAL)
    image = (f"environment: {{image: {torch_image(images, root)}}}\n"
             if images is not None and root is not None else "")
    cfg = tmp / "mpi.yaml"
    cfg.write_text("name: mpi\nentrypoint: python3 -m hpcdet.launch.mpi python3 mpi_trial.py"
                   "\nresources: {slots_per_trial: 4}\nslurm: {slots_per_node: 2}\n"
                   "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n"
                   + image)
    out = h.run("experiment", "create", str(cfg), str(ctx), "-f", timeout=300).stdout
    d = h.describe(int(out.split("Created experiment ")[1].split()[0]))
    assert d["experiment"]["state"] == "COMPLETED", (d, out[-3000:])
    lines = [line for line in out.splitlines() if "[rank=" in line]
    assert len(lines) == 4 and all("allgather=[0, 1, 2, 3]" in line for line in lines), out
    assert {line.split("host=")[1].split()[0] for line in lines} == {"node1", "node2"}
    return out


def site_images_are_used_as_they_are(h: Hpcdet, tmp: Path, images: Images) -> None:
    """An image the site converted into its read-only image_dir runs without a pull."""
    import os
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
