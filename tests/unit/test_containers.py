"""Golden command lines of each container runtime, and where an image comes from."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from hpcdet.containers import (
    Bind,
    ContainerSpec,
    Image,
    exec_argv,
    passed_names,
    pull_argv,
    pull_environment,
    resolve,
    with_workdir,
)

BINDS = (Bind("/scratch/runs/e1", "/scratch/runs/e1"), Bind("/lustre/data", "/data", True))
ENV = {"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "0,1", "DET_HPARAMS": '{"a": 1, "b": 2}',
       "HOME": "/home/u", "SECRET_OF_THE_LOGIN_SHELL": "x", "MY_VAR": "from config"}
ARGV = ["bash", "-c", "python3 train.py"]


def _spec(runtime: str, device: str = "cpu", binds: tuple[Bind, ...] = BINDS) -> ContainerSpec:
    file = {"podman": "docker.io/library/python:3.11"}.get(runtime, "/img/python+3.11.sif")
    return ContainerSpec(runtime, Image("python:3.11", file), device, binds)


def _run(runtime: str, device: str = "cpu") -> tuple[list[str], dict[str, str]]:
    names = passed_names(ENV, extra=["MY_VAR", "DET_HPARAMS"])
    return exec_argv(_spec(runtime, device), "/tmp/hpcdet-1/work", names, ENV, ARGV)


def test_variables_that_reach_the_container() -> None:
    assert passed_names(ENV, extra=["MY_VAR"]) == ["CUDA_VISIBLE_DEVICES", "MY_VAR",
                                                   "SLURM_JOB_ID"]


@pytest.mark.parametrize("runtime", ["apptainer", "singularity"])
@pytest.mark.parametrize(("device", "flag"), [("cpu", []), ("cuda", ["--nv"]),
                                              ("rocm", ["--rocm"])])
def test_apptainer_and_singularity(runtime: str, device: str, flag: list[str]) -> None:
    argv, env = _run(runtime, device)
    assert argv == [
        runtime, "exec", "--cleanenv", "--contain", "--no-eval", "--pwd", "/tmp/hpcdet-1/work", *flag,
        "--bind", "/scratch/runs/e1:/scratch/runs/e1", "--bind", "/lustre/data:/data:ro",
        "/img/python+3.11.sif", "bash", "-c", "python3 train.py"]
    prefix = f"{runtime.upper()}ENV_"
    # By name through the environment: values with commas and quotes intact, and never in
    # the process list.
    assert env == {prefix + "CUDA_VISIBLE_DEVICES": "0,1",
                   prefix + "DET_HPARAMS": '{"a": 1, "b": 2}',
                   prefix + "MY_VAR": "from config", prefix + "SLURM_JOB_ID": "7"}


@pytest.mark.parametrize(("device", "flag"), [
    ("cpu", []), ("cuda", ["--device", "nvidia.com/gpu=all"]),
    ("rocm", ["--device", "/dev/kfd", "--device", "/dev/dri"])])
def test_podman(device: str, flag: list[str]) -> None:
    argv, env = _run("podman", device)
    assert argv == [
        "podman", "run", "--rm", "--network=host", "--ipc=host", "--userns=keep-id",
        "--workdir", "/tmp/hpcdet-1/work", *flag,
        "--volume", "/scratch/runs/e1:/scratch/runs/e1", "--volume", "/lustre/data:/data:ro",
        "--env", "CUDA_VISIBLE_DEVICES", "--env", "DET_HPARAMS", "--env", "MY_VAR",
        "--env", "SLURM_JOB_ID", "docker.io/library/python:3.11", "bash", "-c",
        "python3 train.py"]
    assert env == {}


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_enroot(device: str) -> None:
    argv, env = _run("enroot", device)
    # GPUs come through enroot's hook from NVIDIA_VISIBLE_DEVICES, not a flag.
    assert argv == [
        "enroot", "start", "--rw",
        "--mount", "/scratch/runs/e1:/scratch/runs/e1", "--mount", "/lustre/data:/data:ro",
        "--env", "CUDA_VISIBLE_DEVICES", "--env", "DET_HPARAMS", "--env", "MY_VAR",
        "--env", "SLURM_JOB_ID", "/img/python+3.11.sif", "sh", "-c",
        'cd "$1" && shift && exec "$@"', "enroot-start", "/tmp/hpcdet-1/work",
        "bash", "-c", "python3 train.py"]
    assert env == {}


def test_where_an_image_comes_from() -> None:
    cache = "/home/u/.hpcdet/images"
    assert resolve("/sw/images/torch.sif", "apptainer", None, cache) == Image(
        "/sw/images/torch.sif", "/sw/images/torch.sif")
    assert resolve("determinedai/pytorch-ngc:0.38.0", "apptainer", None, cache) == Image(
        "determinedai/pytorch-ngc:0.38.0", f"{cache}/determinedai+pytorch-ngc+0.38.0.sif",
        "docker://determinedai/pytorch-ngc:0.38.0")
    assert resolve("docker://python:3.11", "enroot", None, cache).file == (
        f"{cache}/python+3.11.sqsh")
    # A site's pre-converted images, in Determined's layout (the reference as a path), are
    # used as they are.
    site = "/sw/images"
    have = {"/sw/images/determinedai/environments:cuda-11.8"}
    assert resolve("determinedai/environments:cuda-11.8", "singularity", site, cache,
                   have.__contains__) == Image("determinedai/environments:cuda-11.8",
                                               "/sw/images/determinedai/environments:cuda-11.8")
    assert resolve("python:3.11", "singularity", site, cache, have.__contains__).pull_from == (
        "docker://python:3.11")
    assert resolve("python:3.11", "podman", site, cache) == Image("python:3.11", "python:3.11")


def test_pull_commands_and_credentials() -> None:
    image = Image("python:3.11", "/c/python+3.11.sif", "docker://python:3.11")
    assert pull_argv("apptainer", image, "/c/.part") == [
        "apptainer", "pull", "/c/.part", "docker://python:3.11"]
    assert pull_argv("singularity", image, "/c/.part", force=True) == [
        "singularity", "pull", "--force", "/c/.part", "docker://python:3.11"]
    assert pull_argv("enroot", image, "/c/x.sqsh") == [
        "enroot", "import", "--output", "/c/x.sqsh", "docker://python:3.11"]
    assert pull_environment("apptainer", {"username": "u", "password": "p"}) == {
        "APPTAINER_DOCKER_USERNAME": "u", "APPTAINER_DOCKER_PASSWORD": "p"}
    assert pull_environment("singularity", {"username": "u", "password": "p"}) == {
        "SINGULARITY_DOCKER_USERNAME": "u", "SINGULARITY_DOCKER_PASSWORD": "p"}
    assert pull_environment("apptainer", {}) == {}


def test_relative_bind_targets_are_in_the_working_directory() -> None:
    assert with_workdir([Bind("/d", "data"), Bind("/e", "/e", True)], "/tmp/w") == [
        Bind("/d", "/tmp/w/data"), Bind("/e", "/e", True)]


def test_the_spec_survives_the_run_spec() -> None:
    spec = ContainerSpec("apptainer", Image("a", "/a.sif", "docker://a"), "cuda", BINDS, True,
                         {"username": "u"})
    assert ContainerSpec.from_dict(spec.to_dict()) == spec


def test_what_cannot_be_bound_is_named(tmp_path: Path, container_root: Path) -> None:
    from hpcdet.errors import ImageError
    from hpcdet.launch.harness import container_binds
    from hpcdet.rundir.spec import RunSpec

    def spec(state: Path) -> RunSpec:
        return RunSpec(1, 1, 1, 0, {}, {}, "true", str(state / "ctx"), str(state / "run"),
                       str(state / "ckpt"), trialside=str(state / "trialside"))

    shared = container_root / "srv"  # not under /tmp
    for d in ("run", "trialside"):
        (shared / d).mkdir(parents=True)
    node = tmp_path / "node"
    (node / "work").mkdir(parents=True)
    image = ContainerSpec("apptainer", Image("x", "/x.sif"),
                          binds=(Bind(str(shared), "data"), Bind("/no/such", "/d")))
    with pytest.raises(ImageError, match="host_path /no/such does not exist on"):
        container_binds(spec(shared), image, node)
    shutil.rmtree(node / "tmp")
    good = replace(image, binds=image.binds[:1])
    binds = container_binds(spec(shared), good, node)
    assert Bind(str(node / "work"), "/hpcdet/work") in binds
    assert Bind(str(node / "tmp"), "/tmp") in binds and Bind(str(node / "tmp"), "/var/tmp") in binds
    assert Bind(str(shared), "/hpcdet/work/data") in binds and (node / "work" / "data").is_dir()
    assert Bind(str(shared / "trialside"), str(shared / "trialside"), True) in binds
    shutil.rmtree(node / "tmp")
    in_tmp = Path("/tmp") / "hpcdet-state"
    with pytest.raises(ImageError, match="is under /tmp, which every container has of its own"):
        container_binds(spec(in_tmp), good, node)


def test_the_trial_side_goes_before_the_images_own_pythonpath(tmp_path: Path) -> None:
    import subprocess

    from hpcdet.containers import with_trialside

    show = ["python3", "-c", "import os; print(os.environ['PYTHONPATH'])"]
    for image, expected in (("/img/lib", "/ts:/img/lib"), ("", "/ts")):
        env = {"PATH": "/usr/bin:/bin", "HPCDET_TRIALSIDE": "/ts", "PYTHONPATH": image}
        out = subprocess.run(with_trialside(show), env=env, capture_output=True, text=True)
        assert out.stdout.strip() == expected


def test_the_runtime_found_at_submit_is_used_where_path_lacks_it() -> None:
    spec = replace(_spec("apptainer"), executable="/opt/apptainer/bin/apptainer")
    argv, _ = exec_argv(spec, "/w", [], {}, ["true"])
    assert argv[0] == "/opt/apptainer/bin/apptainer"
    image = Image("python:3.11", "/c/python+3.11.sif", "docker://python:3.11")
    assert pull_argv("apptainer", image, "/c/p", program=spec.program)[0] == spec.executable
