"""Golden command lines of each container runtime, and where an image comes from."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from hpcdet import containers
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


USER = (1005, 1006)  # a user's uid and gid; root is (0, 0)


def _spec(runtime: str, device: str = "cpu", binds: tuple[Bind, ...] = BINDS) -> ContainerSpec:
    file = ("docker.io/library/python:3.11" if runtime in ("podman", "docker")
            else "/img/python+3.11.sif")
    return ContainerSpec(runtime, Image("python:3.11", file), device, binds)


def _run(runtime: str, device: str = "cpu", user: tuple[int, int] = USER,
         env: dict[str, str] = ENV) -> tuple[list[str], dict[str, str]]:
    names = passed_names(env, extra=["MY_VAR", "DET_HPARAMS"])
    return exec_argv(_spec(runtime, device), "/tmp/hpcdet-1/work", names, env, ARGV,
                     user=user)


def test_variables_that_reach_the_container() -> None:
    assert passed_names(ENV, extra=["MY_VAR"]) == ["CUDA_VISIBLE_DEVICES", "MY_VAR",
                                                   "SLURM_JOB_ID"]


@pytest.mark.parametrize("runtime", ["apptainer", "singularity"])
@pytest.mark.parametrize(("device", "flag"), [("cpu", []), ("cuda", ["--nv"]),
                                              ("rocm", ["--rocm"])])
def test_apptainer_and_singularity(runtime: str, device: str, flag: list[str]) -> None:
    argv, env = _run(runtime, device)
    assert argv == [
        runtime, "exec", "--cleanenv", "--no-mount", "home,cwd,tmp", "--no-eval",
        "--pwd", "/tmp/hpcdet-1/work", *flag,
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
def test_podman_rootless(device: str, flag: list[str]) -> None:
    argv, env = _run("podman", device)
    assert argv == [
        "podman", "run", "--rm", "--init", "--network=host", "--ipc=host", "--userns=keep-id",
        "--workdir", "/tmp/hpcdet-1/work", *flag,
        "--volume", "/scratch/runs/e1:/scratch/runs/e1", "--volume", "/lustre/data:/data:ro",
        "--env", "CUDA_VISIBLE_DEVICES", "--env", "DET_HPARAMS", "--env", "MY_VAR",
        "--env", "SLURM_JOB_ID", "docker.io/library/python:3.11", "bash", "-c",
        "python3 train.py"]
    assert env == {}


def test_podman_as_root_runs_without_keep_id() -> None:
    # Podman as root: "Error: keep-id is only supported in rootless mode"; root in the
    # container is the root that started it.
    argv, env = _run("podman", "cuda", user=(0, 0))
    assert argv == [
        "podman", "run", "--rm", "--init", "--network=host", "--ipc=host",
        "--workdir", "/tmp/hpcdet-1/work", "--device", "nvidia.com/gpu=all",
        "--volume", "/scratch/runs/e1:/scratch/runs/e1", "--volume", "/lustre/data:/data:ro",
        "--env", "CUDA_VISIBLE_DEVICES", "--env", "DET_HPARAMS", "--env", "MY_VAR",
        "--env", "SLURM_JOB_ID", "docker.io/library/python:3.11", "bash", "-c",
        "python3 train.py"]
    assert env == {}


DOCKER_BINDS = ["--volume", "/scratch/runs/e1:/scratch/runs/e1",
                "--volume", "/lustre/data:/data:ro"]
DOCKER_ENV = ["--env", "CUDA_VISIBLE_DEVICES", "--env", "DET_HPARAMS", "--env", "MY_VAR",
              "--env", "SLURM_JOB_ID"]


@pytest.mark.parametrize("user", [USER, (0, 0)])
@pytest.mark.parametrize(("device", "flag"), [
    ("cpu", []), ("rocm", ["--device", "/dev/kfd", "--device", "/dev/dri"])])
def test_docker(device: str, flag: list[str], user: tuple[int, int]) -> None:
    argv, env = _run("docker", device, user=user)
    # The user's own uid and gid, also as root; HOME the working directory (docker's would
    # be /, which the user cannot write); variables by name only.
    assert argv == [
        "docker", "run", "--rm", "--init", "--network=host", "--ipc=host",
        "--user", f"{user[0]}:{user[1]}", "--env", "HOME=/tmp/hpcdet-1/work",
        "--workdir", "/tmp/hpcdet-1/work", *flag, *DOCKER_BINDS, *DOCKER_ENV,
        "docker.io/library/python:3.11", "bash", "-c", "python3 train.py"]
    assert env == {}
    for value in (ENV["DET_HPARAMS"], ENV["MY_VAR"], ENV["CUDA_VISIBLE_DEVICES"]):
        assert not any(value in a for a in argv)


def test_docker_gives_the_job_its_own_gpus_numbered_from_0() -> None:
    argv, env = _run("docker", "cuda", env={**ENV, "CUDA_VISIBLE_DEVICES": "2,3"})
    # --gpus reads CSV: the quotes keep the list one value.
    assert argv[argv.index("--gpus") + 1] == '"device=2,3"'
    assert "nvidia.com/gpu=all" not in argv and "--device" not in argv
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1"}
    argv, env = _run("docker", "cuda", env={k: v for k, v in ENV.items()
                                            if k != "CUDA_VISIBLE_DEVICES"})
    assert argv[argv.index("--gpus") + 1] == "all" and env == {}


def test_propagation_reaches_podman_and_docker_volumes() -> None:
    binds = (Bind("/lustre/data", "/data", True, "rslave"),
             Bind("/scratch", "/s", False, "rshared"))
    for runtime in ("podman", "docker"):
        argv, _ = exec_argv(_spec(runtime, binds=binds), "/w", [], {}, ["true"], user=USER)
        volumes = [argv[i + 1] for i, a in enumerate(argv) if a == "--volume"]
        assert volumes == ["/lustre/data:/data:ro,rslave", "/scratch:/s:rshared"]
    argv, _ = exec_argv(_spec("apptainer", binds=binds), "/w", [], {}, ["true"], user=USER)
    assert "/lustre/data:/data:ro" in argv and not any("rslave" in a for a in argv)


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
    # Docker keeps its own store too: the reference, never a converted file.
    assert resolve("docker://python:3.11", "docker", site, cache) == Image(
        "docker://python:3.11", "python:3.11")


def test_pull_commands_and_credentials() -> None:
    image = Image("python:3.11", "/c/python+3.11.sif", "docker://python:3.11")
    assert pull_argv("apptainer", image, "/c/.part") == [
        "apptainer", "pull", "/c/.part", "docker://python:3.11"]
    assert pull_argv("singularity", image, "/c/.part", force=True) == [
        "singularity", "pull", "--force", "/c/.part", "docker://python:3.11"]
    assert pull_argv("enroot", image, "/c/x.sqsh") == [
        "enroot", "import", "--output", "/c/x.sqsh", "docker://python:3.11"]
    assert pull_argv("docker", Image("python:3.11", "python:3.11", "python:3.11"), "") == [
        "docker", "pull", "python:3.11"]
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
    argv, _ = exec_argv(spec, "/w", [], {}, ["true"], user=USER)
    assert argv[0] == "/opt/apptainer/bin/apptainer"
    image = Image("python:3.11", "/c/python+3.11.sif", "docker://python:3.11")
    assert pull_argv("apptainer", image, "/c/p", program=spec.program)[0] == spec.executable


# What the runtimes print when they cannot start a container, as measured on this project's
# machines (shared/reference/container-runtimes.md): the lines of stderr, in order.
PODMAN_NO_IMAGE = [
    "Trying to pull localhost/nope:1...",
    'WARN[0000] Failed, retrying in 1s ... (1/3). Error: initializing source '
    'docker://localhost/nope:1: pinging container registry localhost: Get '
    '"https://localhost/v2/": dial tcp [::1]:443: connect: connection refused',
    'Error: initializing source docker://localhost/nope:1: pinging container registry '
    'localhost: Get "https://localhost/v2/": dial tcp [::1]:443: connect: connection refused']
PODMAN_NO_COMMAND = [
    'Error: runc: runc create failed: unable to start container process: exec: "nosuchcmd": '
    'executable file not found in $PATH: OCI runtime attempted to invoke a command that was '
    'not found']
PODMAN_ROOTLESS_NOISE = [
    'time="2026-11-28T10:01:02Z" level=warning msg="\\"/\\" is not a shared mount, this could '
    'cause issues or missing mounts with rootless containers"']
DOCKER_NO_IMAGE = [
    "Unable to find image 'localhost/nope:1' locally",
    'docker: Error response from daemon: Get "http://localhost/v2/": dial tcp [::1]:80: '
    'connect: connection refused.',
    "See 'docker run --help'."]
DOCKER_28_NO_IMAGE = ["docker: Error response from daemon: No such image: nope:latest",
                      "Run 'docker run --help' for more information"]
DOCKER_NO_COMMAND = [
    'docker: Error response from daemon: failed to create shim task: OCI runtime create '
    'failed: runc create failed: unable to start container process: exec: "nosuchcmd": '
    'executable file not found in $PATH: unknown.']
DOCKER_NO_GROUP = [
    "docker: permission denied while trying to connect to the Docker daemon socket at "
    "unix:///var/run/docker.sock: Post \"http://%2Fvar%2Frun%2Fdocker.sock/v1.24/containers/"
    "create\": dial unix /var/run/docker.sock: connect: permission denied.",
    "See 'docker run --help'."]
APPTAINER_NO_IMAGE = [
    "INFO:    gocryptfs not found, will not be able to use gocryptfs",
    "FATAL:   While checking container encryption: could not open image /d/nope.sif: failed "
    "to retrieve path for /d/nope.sif: lstat /d/nope.sif: no such file or directory"]
APPTAINER_NO_COMMAND = ['FATAL:   "nosuchcmd": executable file not found in $PATH']
APPTAINER_NO_BIND = [
    "WARNING: skipping mount of /nonexistent: stat /nonexistent: no such file or directory",
    "FATAL:   container creation failed: mount hook function failure: mount /nonexistent->/x "
    "error: while mounting /nonexistent: mount source /nonexistent doesn't exist"]
APPTAINER_CAPS = ["ERROR  : Requesting capability set 0x000001ffffffffff while permitted "
                  "capability set is 0x000001fffeffffff"]
ENROOT_NO_IMAGE = ["[ERROR] Invalid argument: /d/nope.sqsh"]


@pytest.mark.parametrize(("runtime", "code", "output"), [
    ("podman", 125, PODMAN_ROOTLESS_NOISE + PODMAN_NO_IMAGE),
    ("podman", 127, PODMAN_NO_COMMAND),
    ("docker", 125, DOCKER_NO_IMAGE),
    ("docker", 125, DOCKER_28_NO_IMAGE),
    ("docker", 127, DOCKER_NO_COMMAND),
    ("docker", 126, DOCKER_NO_GROUP),
    ("apptainer", 255, APPTAINER_NO_IMAGE),
    ("apptainer", 255, APPTAINER_NO_COMMAND),
    ("apptainer", 255, APPTAINER_NO_BIND),
    ("apptainer", 1, APPTAINER_CAPS),
    ("singularity", 255, APPTAINER_NO_COMMAND),
    ("enroot", 1, ENROOT_NO_IMAGE),
])
def test_the_runtimes_own_message_says_why_the_container_did_not_start(
        runtime: str, code: int, output: list[str]) -> None:
    from hpcdet.containers import runtime_failure

    said = runtime_failure(runtime, "img:1", code, output)
    # The runtime's own last error line, whole, after what hpcdet says of it.
    own = next(line for line in reversed(output)
               if line.startswith(("FATAL:", "ERROR  :", "Error:", "docker:", "[ERROR]")))
    assert said == (f"{runtime} could not start the trial's container from img:1 "
                    f"(exit code {code}): {own}")


def test_a_runtimes_exit_code_without_its_words_is_still_its_failure() -> None:
    from hpcdet.containers import runtime_failure

    assert runtime_failure("podman", "img:1", 125, ["", "something else  "]) == (
        "podman could not start the trial's container from img:1 (exit code 125): its last words: "
        "something else")
    assert runtime_failure("docker", "img:1", 126, []) == (
        "docker could not start the trial's container from img:1 (exit code 126): "
        "it printed nothing")
    # Not the runtime's code, nor its words: not said to be its failure (a signal, say).
    assert runtime_failure("apptainer", "img:1", 143, ["Terminated"]) is None
    assert runtime_failure("podman", "img:1", 1, []) is None


def test_the_first_command_in_the_container_marks_that_it_started(tmp_path: Path) -> None:
    import subprocess

    from hpcdet.containers import with_trialside

    started = tmp_path / "0.started"
    env = {"PATH": "/usr/bin:/bin", "HPCDET_TRIALSIDE": "/ts"}
    show = ["sh", "-c", 'echo "$PYTHONPATH" "$0" "$@"; exit 3', "a", "b c"]
    out = subprocess.run(with_trialside(show, started=str(started)), env=env,
                         capture_output=True, text=True)
    assert (out.returncode, out.stdout, started.exists()) == (3, "/ts a b c\n", True)
    # A marker that cannot be made does not stop the trial; a missing command is the
    # shell's (the trial's), named after hpcdet-trial.
    out = subprocess.run(with_trialside(["nosuchcmd"], started=str(tmp_path / "no" / "x")),
                         env=env, capture_output=True, text=True)
    assert out.returncode == 127 and out.stderr.startswith("hpcdet-trial:"), out.stderr
    assert "nosuchcmd" in out.stderr and "no/x" not in out.stderr


@pytest.mark.parametrize("said", [
    "sh: 1: hpcdet-no-such-command: not found",
    "hpcdet-trial: 1: exec: nosuchcmd: not found",
    "bash: line 1: nosuchcmd: command not found",
])
def test_a_command_the_image_lacks_is_named(said: str) -> None:
    why = containers.missing_command("python:3.11", 127, ["[hpcdet] running", said, ""])
    assert why is not None and "is not in the image python:3.11" in why and said in why


def test_a_trials_own_127_or_other_words_are_the_trials() -> None:
    assert containers.missing_command("img", 1, ["sh: 1: x: not found"]) is None
    assert containers.missing_command("img", 127, ["x: not found", "Traceback ..."]) is None
    assert containers.missing_command("img", 127, []) is None


def test_apptainers_home_is_the_working_directory() -> None:
    """Not --contain (a /dev/shm of each container's own would keep one node's ranks apart):
    the host's cwd and /tmp stay out, and the working directory is bound as the home, the
    one way to set $HOME in Apptainer."""
    spec = _spec("apptainer", binds=(Bind("/runs/e1/node-0/work", "/hpcdet/work"), *BINDS))
    argv, _ = exec_argv(spec, "/hpcdet/work", [], ENV, ARGV, user=USER)
    assert argv[:9] == ["apptainer", "exec", "--cleanenv", "--no-mount", "cwd,tmp", "--home",
                        "/runs/e1/node-0/work:/hpcdet/work", "--no-eval", "--pwd"]
    assert "--contain" not in argv and "/runs/e1/node-0/work:/hpcdet/work" not in [
        a for i, a in enumerate(argv) if argv[i - 1] == "--bind"]


@pytest.mark.parametrize("runtime", ["podman", "docker"])
def test_force_pull_image_pulls_on_each_node_for_runtimes_with_their_own_store(
        runtime: str) -> None:
    spec = replace(_spec(runtime), force_pull=True)
    argv, _ = exec_argv(spec, "/w", [], ENV, ARGV, user=USER)
    assert "--pull=always" in argv[:argv.index(spec.image.file)]
    argv, _ = exec_argv(_spec(runtime), "/w", [], ENV, ARGV, user=USER)
    assert not any(a.startswith("--pull") for a in argv)
