"""Container runtimes as data: where an image comes from, and the command lines that pull it
and run a trial's entrypoint in it. Pure functions; ``hpcdet.images`` runs the pulls and the
harness runs the entrypoint.

The runtime wraps the whole entrypoint on each node (one container per node, as Determined's
HPC launcher did): the launchers (torchrun, deepspeed) then run inside the image, next to the
packages they start. Variables reach the container by name, never on the command line, where
every user of the node could read them in the process list: Apptainer and Singularity take
``APPTAINERENV_<NAME>`` (``SINGULARITYENV_<NAME>``) from the environment even with
``--cleanenv`` (apptainer.org/docs/user/main/environment_and_metadata.html); Podman's,
Docker's and Enroot's ``--env NAME`` without a value take the value from the environment
(podman-run(1), docker-run(1), enroot(1) start).

Docker runs through its CLI, not the Docker SDK for Python: the harness already forwards
signals to a child process, reads its exit code and streams its output into the node log, and
``docker run`` is a child like the other runtimes (it proxies signals to the container and
returns the entrypoint's exit code), so its command stays data beside theirs. The SDK would
need the ``docker`` package in the trial's environment on every node, and a loop of its own to
attach, forward signals and wait. Like Podman, Docker keeps its images in its own store and
``docker run`` pulls a missing one (``docker pull`` by hand: ``pull_argv``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

RUNTIMES = ("apptainer", "singularity", "podman", "docker", "enroot")
# Runtimes that keep images in a store of their own: the image is a reference there, which
# the runtime pulls itself, not a file hpcdet converts.
OWN_STORE = ("podman", "docker")
# bind_mounts[].propagation (Determined's, Docker's and Podman's names); rprivate: the default.
PROPAGATIONS = ("rprivate", "private", "rshared", "shared", "rslave", "slave")
# Inside the container: the trial's working directory (its node's copy of the context), and
# the directories each container has of its own (Determined's known issue: Singularity shares
# the host's /tmp unless told otherwise).
WORKDIR = "/hpcdet/work"
# Set inside the container: the image the config named, and where hpcdet's trial side is.
IMAGE_ENV = "HPCDET_IMAGE"
TRIALSIDE_ENV = "HPCDET_TRIALSIDE"
PRIVATE_DIRS = ("/tmp", "/var/tmp")
DEFAULT_RUNTIME = "apptainer"
DOCKER = "docker://"

# What reaches the container of the host's environment besides the variables hpcdet sets and
# the config's: the batch system's and the devices the job was given.
PASSED_PREFIXES = ("SLURM_", "PBS_", "PMI_", "PMIX_", "OMPI_")
# How Apptainer and Singularity take a variable into the container by name.
RUNTIME_ENV_PREFIXES = ("APPTAINERENV_", "SINGULARITYENV_")
PASSED_NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "OMP_NUM_THREADS", "TZ", "LANG",
})


@dataclass(frozen=True)
class Bind:
    host: str
    target: str
    read_only: bool = False
    # bind_mounts[].propagation (rshared, rslave, ...); "": the runtime's default (rprivate).
    # Only Podman and Docker apply one (jobspec warns about the others).
    propagation: str = ""

    def options(self) -> str:
        """The ``:ro,rslave`` tail of a Podman or Docker ``--volume``."""
        said = [o for o in ("ro" if self.read_only else "", self.propagation) if o]
        return ":" + ",".join(said) if said else ""


@dataclass(frozen=True)
class Image:
    """Where the image a trial runs in comes from.

    ``file`` is what the runtime runs (a SIF for Apptainer and Singularity, a squashfs for
    Enroot, the reference itself for Podman and Docker, which keep their own stores);
    ``pull_from`` is the registry reference to convert into ``file`` when it is not there yet
    (None: use as is).
    """

    named: str
    file: str
    pull_from: str | None = None


@dataclass(frozen=True)
class ContainerSpec:
    """What the harness needs to run a trial in a container (part of the run spec)."""

    runtime: str
    image: Image
    device: str = "cpu"  # cpu, cuda or rocm: the GPU flag
    binds: tuple[Bind, ...] = ()
    force_pull: bool = False
    registry_auth: dict[str, str] = field(default_factory=dict)
    # The runtime's executable where the run was submitted: jobs whose environment lacks it on
    # PATH (PBS passes the submitter's none) use it when the node has it at that path.
    executable: str = ""

    @property
    def program(self) -> str:
        return self.executable or self.runtime

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContainerSpec:
        return cls(
            runtime=data["runtime"],
            image=Image(**data["image"]),
            device=data.get("device", "cpu"),
            binds=tuple(Bind(**b) for b in data.get("binds", ())),
            force_pull=data.get("force_pull", False),
            registry_auth=dict(data.get("registry_auth") or {}),
            executable=data.get("executable", ""),
        )


def is_local(named: str) -> bool:
    """A path to an image file or directory rather than a registry reference."""
    return named.startswith(("/", "./", "../", "~")) or named.endswith((".sif", ".sqsh", ".img"))


def cache_name(reference: str, runtime: str) -> str:
    """The file a registry reference converts to: ``library/python:3.11`` ->
    ``library+python+3.11.sif`` (Enroot's own convention of ``+`` for ``/`` and ``:``)."""
    bare = reference[len(DOCKER):] if reference.startswith(DOCKER) else reference
    stem = re.sub(r"[/:@]", "+", bare.strip("/"))
    return f"{stem}.sqsh" if runtime == "enroot" else f"{stem}.sif"


def resolve(named: str, runtime: str, image_dir: str | None, cache_dir: str,
            exists: Any = None) -> Image:
    """Where ``environment.image`` comes from: a local file as is; a reference from the site's
    image directory when it holds it pre-converted (Determined's layout: the reference as a
    path, ``<dir>/determinedai/environments:tag``, or the converted file's name), else
    converted once into ``cache_dir``. ``exists`` (a path predicate) is for tests."""
    exists = exists or (lambda p: Path(p).exists())
    if is_local(named):
        return Image(named, str(Path(named).expanduser()))
    reference = named if "://" in named else DOCKER + named
    if runtime in OWN_STORE:
        return Image(named, reference[len(DOCKER):] if reference.startswith(DOCKER) else named)
    if image_dir:
        bare = reference.split("://", 1)[1]
        for candidate in (Path(image_dir) / bare, Path(image_dir) / cache_name(reference, runtime)):
            if exists(str(candidate)):
                return Image(named, str(candidate))
    return Image(named, str(Path(cache_dir) / cache_name(reference, runtime)), reference)


def pull_argv(runtime: str, image: Image, dest: str, force: bool = False,
              program: str = "") -> list[str]:
    """The command that converts ``image.pull_from`` into ``dest`` (``program``: the runtime's
    executable, when not the one on PATH)."""
    assert image.pull_from is not None
    program = program or runtime
    if runtime in ("apptainer", "singularity"):
        return [program, "pull", *(["--force"] if force else []), dest, image.pull_from]
    if runtime == "enroot":
        return [program, "import", "--output", dest, image.pull_from]
    return [program, "pull", image.pull_from]


def pull_environment(runtime: str, auth: Mapping[str, str]) -> dict[str, str]:
    """``registry_auth`` as the runtime's own credential variables (apptainer.org docs,
    "Docker / OCI registries": ``APPTAINER_DOCKER_USERNAME`` and ``_PASSWORD``)."""
    if runtime not in ("apptainer", "singularity") or not auth.get("username"):
        return {}
    prefix = runtime.upper()
    return {f"{prefix}_DOCKER_USERNAME": auth["username"],
            f"{prefix}_DOCKER_PASSWORD": auth.get("password", "")}


def passed_names(env: Mapping[str, str], extra: Sequence[str] = ()) -> list[str]:
    """The names of ``env`` that go into the container: the batch system's, the devices',
    hpcdet's and Determined's, and ``extra`` (the config's and the trial's own)."""
    wanted = set(extra)
    return sorted(
        k for k in env if k in wanted or k in PASSED_NAMES or k.startswith(PASSED_PREFIXES)
    )


def with_workdir(binds: Sequence[Bind], workdir: str) -> list[Bind]:
    """A relative container_path is relative to the trial's working directory."""
    return [b if posixpath.isabs(b.target) else
            replace(b, target=posixpath.normpath(posixpath.join(workdir, b.target)))
            for b in binds]


def with_trialside(argv: Sequence[str], started: str = "") -> list[str]:
    """``argv`` with hpcdet's trial side first on the PYTHONPATH the image sets, if any: the
    variable is completed inside the container, where the image's value is known.
    ``started``: a file to create first, which tells the harness that the container started
    and what failed after it was the trial (``runtime_failure``)."""
    # `true`, a regular built-in: a redirection it cannot make does not end the shell.
    mark = ['true 2>/dev/null >"$1"; shift; '] if started else []
    return ["sh", "-c", "".join(mark) + f'export PYTHONPATH="${TRIALSIDE_ENV}'
            '${PYTHONPATH:+:$PYTHONPATH}"; exec "$@"', "hpcdet-trial",
            *([started] if started else []), *argv]


def exec_argv(spec: ContainerSpec, workdir: str, names: Sequence[str],
              env: Mapping[str, str], argv: Sequence[str],
              user: tuple[int, int]) -> tuple[list[str], dict[str, str]]:
    """The command that runs ``argv`` in the container as ``user`` (the caller's effective
    uid and gid), and the variables to add to the runtime's own environment so that ``names``
    of ``env`` reach the trial."""
    binds = list(spec.binds)
    if spec.runtime in ("apptainer", "singularity"):
        # --no-eval: without it the runtime evaluates each value in a shell inside, so a `$`
        # or a backquote in a variable would be expanded or run (measured, Apptainer 1.4.5).
        # Not --contain: it gives each container a /dev and /dev/shm of its own, where the
        # ranks of one node (MPI, NCCL) meet, and hides /dev/infiniband. Instead neither the
        # host's cwd nor its /tmp is mounted (the harness binds private ones) and the home
        # directory is the working directory, as with Podman and Docker: the host's is not
        # mounted either, and $HOME cannot be set otherwise (only through --home).
        home = next((b for b in binds if b.target == workdir), None)
        flags = ["exec", "--cleanenv", "--no-eval", "--pwd", workdir]
        if home is None:
            flags[2:2] = ["--no-mount", "home,cwd,tmp"]
        else:
            flags[2:2] = ["--no-mount", "cwd,tmp", "--home", f"{home.host}:{workdir}"]
            binds.remove(home)
        flags += {"cuda": ["--nv"], "rocm": ["--rocm"]}.get(spec.device, [])
        for b in binds:
            flags += ["--bind", f"{b.host}:{b.target}" + (":ro" if b.read_only else "")]
        prefix = RUNTIME_ENV_PREFIXES[spec.runtime == "singularity"]
        return ([spec.program, *flags, spec.image.file, *argv],
                {prefix + n: env[n] for n in names})
    if spec.runtime in OWN_STORE:
        # --init: the entrypoint as PID 1 ignores the SIGTERM the client forwards (measured:
        # `docker run`/`podman run` of python3 outlived a SIGTERM to the client, and a job
        # killed then leaves it running under the daemon); an init passes it on.
        flags, extra = ["run", "--rm", "--init", "--network=host", "--ipc=host"], {}
        if spec.runtime == "podman":
            # Rootless, keep-id runs the trial as the user (and sets HOME to the working
            # directory); as root Podman refuses it ("keep-id is only supported in rootless
            # mode"), and root in the container is the user who started it.
            flags += ["--userns=keep-id"] if user[0] != 0 else []
        else:
            # The daemon runs as root: the trial runs as the user, so its files on the binds
            # are the user's. Docker then sets HOME=/ (no passwd entry in the image), which the
            # user cannot write: the working directory, as Podman's keep-id does.
            flags += ["--user", f"{user[0]}:{user[1]}", "--env", f"HOME={workdir}"]
        flags += ["--workdir", workdir]
        # Each node has a store of its own: force_pull_image is honoured where the trial runs.
        flags += ["--pull=always"] if spec.force_pull else []
        if spec.device == "cuda" and spec.runtime == "docker":
            # The daemon starts the container outside the job's cgroup, so only the job's own
            # GPUs go in; inside they are numbered from 0.
            given = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",")
                     if d.strip()]
            # --gpus reads its value as CSV: a list of devices is quoted (docker-run(1)).
            flags += ["--gpus", f'"device={",".join(given)}"' if given else "all"]
            if given:
                extra["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(given)))
        else:
            flags += {"cuda": ["--device", "nvidia.com/gpu=all"],
                      "rocm": ["--device", "/dev/kfd", "--device", "/dev/dri"]
                      }.get(spec.device, [])
        for b in binds:
            flags += ["--volume", f"{b.host}:{b.target}{b.options()}"]
        for n in names:
            flags += ["--env", n]
        return [spec.program, *flags, spec.image.file, *argv], extra
    # enroot start runs a squashfs image directly; GPUs come from its NVIDIA hook, which
    # reads NVIDIA_VISIBLE_DEVICES (passed like every device variable).
    flags = ["start", "--rw"]
    for b in binds:
        flags += ["--mount", f"{b.host}:{b.target}" + (":ro" if b.read_only else "")]
    for n in names:
        flags += ["--env", n]
    return [spec.program, *flags, spec.image.file, "sh", "-c", 'cd "$1" && shift && exec "$@"',
            "enroot-start", workdir, *argv], {}


# What the runtimes print when they cannot start a container: Apptainer's Go side
# ("FATAL:   ...") and its starter ("ERROR  : ..."), Podman's ("Error: ..."), the Docker
# client's ("docker: Error response from daemon: ...", "docker: permission denied ..."),
# Enroot's ("[ERROR] ...").
_RUNTIME_SAYS = ("FATAL:", "ERROR  :", "Error:", "docker:", "[ERROR]")
# Exit codes of a runtime that failed itself: Podman's and Docker's own failure (125), a
# command it could not run (126) or find (127); Apptainer's FATAL (255).
RUNTIME_EXIT_CODES = frozenset({125, 126, 127, 255})


def runtime_failure(runtime: str, image: str, exit_code: int, output: Sequence[str]
                    ) -> str | None:
    """Why ``runtime`` failed to start the trial's container, from its exit code and the last
    lines of its output, or None when nothing says it was the runtime's failure. Asked only
    when the container's first command never ran (``with_trialside``'s ``started`` file was
    not made), so an exit code of 125-127 or 255 is the runtime's, not the trial's."""
    lines = [line.strip() for line in output if line.strip()]
    said = next((line for line in reversed(lines) if line.startswith(_RUNTIME_SAYS)), None)
    if said is None and exit_code not in RUNTIME_EXIT_CODES:
        return None
    why = said or (f"its last words: {lines[-1]}" if lines else "it printed nothing")
    return (f"{runtime} could not start the trial's container from {image} "
            f"(exit code {exit_code}): {why}")


# How sh (dash: "sh: 1: NAME: not found"; the wrapper's exec: "exec: NAME: not found") and
# bash ("NAME: command not found") say that a command is not there.
_NOT_FOUND = re.compile(r"(?:^|: )([^\s:]+): (?:command )?not found$")


def missing_command(image: str, exit_code: int, output: Sequence[str]) -> str | None:
    """Why a trial that started in its image ended at once: its shell could not find the
    entrypoint's command (exit code 127 and the shell's words on the last line), which no
    restart in the same image can mend; or None."""
    lines = [line.strip() for line in output if line.strip()]
    found = _NOT_FOUND.search(lines[-1]) if exit_code == 127 and lines else None
    if found is None:
        return None
    return (f"the command {found.group(1)!r} is not in the image {image} ({lines[-1]}); "
            "install it in the image, or fix the entrypoint")


def version_argvs(runtime: str, program: str) -> list[list[str]]:
    """The commands that tell ``runtime``'s version, in the order to ask them: Docker's
    daemon first (what runs the containers; its client may be newer), then its client."""
    if runtime == "docker":
        return [[program, "version", "--format", "{{.Server.Version}}"], [program, "--version"]]
    return [[program, "--version"]]


def parse_version(runtime: str, output: str) -> str | None:
    """The product and version a runtime's version command printed, or None:
    ``apptainer version 1.4.5`` -> ``apptainer 1.4.5``; ``singularity-ce version 3.11.4``
    -> ``singularity-ce 3.11.4`` (a ``singularity`` that is Apptainer says so); ``Docker version
    28.2.2, build e6534b4`` and ``20.10.24`` -> ``docker ...``; Enroot's ``4.1.2``."""
    line = next((s.strip() for s in output.splitlines() if s.strip()), "")
    found = re.search(r"\b(\d+\.\d+[\w.+~-]*)", line)
    if found is None:
        return None
    product = re.match(r"([\w-]+) version\b", line, re.IGNORECASE)
    return f"{product.group(1).lower() if product else runtime} {found.group(1)}"
