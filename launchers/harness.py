"""The per-node harness: ``python -m hpcdet.launch.harness RUN_DIR``.

The batch script starts one harness per node. Each harness finds its node rank and address,
meets the others through files in ``RUN_DIR/nodes/``, writes the cluster info that
``det.get_cluster_info()`` reads, copies the context snapshot into a node-local working
directory, runs ``startup-hook.sh`` and the entrypoint, and keeps the node's log in the run
tree. SIGUSR2 and SIGTERM become a preemption request (the file ``RUN_DIR/preempt``), which
the trial sees as ``should_preempt() == True``, unless the daemon is killing the run
(``RUN_DIR/kill``); the exit code is the entrypoint's.
"""

from __future__ import annotations

import datetime
import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO

from hpcdet import images
from hpcdet.containers import (
    IMAGE_ENV,
    PRIVATE_DIRS,
    TRIALSIDE_ENV,
    WORKDIR,
    Bind,
    ContainerSpec,
    exec_argv,
    missing_command,
    passed_names,
    runtime_failure,
    with_trialside,
    with_workdir,
)
from hpcdet.errors import ImageError
from hpcdet.launch import gpu_watch
from hpcdet.launch.host_step import PREFIX_ENV, HostSteps, container_record
from hpcdet.node_env import NodeEnv
from hpcdet.private import hpcdet_command, tighten_umask
from hpcdet.rundir import layout
from hpcdet.rundir.atomic import dumps, write_atomic, write_text_atomic
from hpcdet.rundir.layout import KILL_FILE, PREEMPT_FILE
from hpcdet.rundir.spec import CLUSTER_INFO_ENV, RUN_DIR_ENV, ClusterInfoRecord, RunSpec

RENDEZVOUS_TIMEOUT = 300.0
# The last lines of the entrypoint's output kept to say why its container did not start.
TAIL_LINES = 40


def own_address(node: NodeEnv, num_nodes: int) -> str:
    """The address the other nodes can reach this one at."""
    if num_nodes == 1:
        return "127.0.0.1"
    chief = node.route_to
    if chief:
        # A UDP connect sends nothing; it asks the kernel which source address routes to the
        # chief, which is the interface the other nodes share with this one.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect((chief, 9))
                return str(s.getsockname()[0])
            except OSError:  # a name this node cannot resolve: its own name's address then
                pass
    return socket.gethostbyname(socket.gethostname())


def deadline_notice(run_dir: Path, deadline: float) -> threading.Timer:
    """Ask the trial to checkpoint and exit at ``deadline`` (epoch seconds), as the scheduler's
    early signal does where there is one (some batch systems send none before the walltime)."""
    timer = threading.Timer(max(0.0, deadline - time.time()),
                            lambda: (run_dir / PREEMPT_FILE).touch())
    timer.daemon = True
    timer.start()
    return timer


def rendezvous(run_dir: Path, rank: int, address: str, num_nodes: int) -> list[str]:
    """Every node's address, once every node has written its own."""
    write_text_atomic(layout.node_address(run_dir, rank), address)
    deadline = time.monotonic() + RENDEZVOUS_TIMEOUT
    while True:
        paths = [layout.node_address(run_dir, r) for r in range(num_nodes)]
        if all(p.exists() for p in paths):
            return [p.read_text().strip() for p in paths]
        if time.monotonic() > deadline:
            missing = [str(r) for r, p in enumerate(paths) if not p.exists()]
            raise TimeoutError(f"nodes {', '.join(missing)} did not start within 300 s")
        time.sleep(0.2)


# Determined sources startup-hook.sh in bash and stops the trial when a command in it fails;
# what it exports reaches the entrypoint. $1 is the file that says the hook has finished.
_HOOK = 'done=$1; shift\nset -eE\n. ./startup-hook.sh\nset +eE\n: > "$done"\nexec "$@"\n'
# A string entrypoint runs through a shell, as Determined's does: bash where the image has it,
# for bash execs the entrypoint's last command (Debian's sh, dash, keeps waiting for it). The
# trial is then the process that a scheduler's, or a container runtime's, SIGTERM reaches,
# where dash would die of it (143) while the trial checkpoints on it (hpcdet.core._preempt).
_SHELL = 'command -v bash >/dev/null 2>&1 && exec bash -c "$1" "$0"\neval "$1"\n'


def entrypoint_argv(entrypoint: str | list[str], hook_done: Path | None) -> list[str]:
    """Determined's rule: a string runs through `sh -c`, a list runs as argv; with a startup
    hook (``hook_done``: the file written once it has finished), the hook runs first."""
    argv = (["sh", "-c", _SHELL, "sh", entrypoint] if isinstance(entrypoint, str)
            else list(entrypoint))
    if hook_done is None:
        return argv
    return ["bash", "-c", _HOOK, "startup-hook", str(hook_done), *argv]


def trial_variables(
    spec: RunSpec, info_path: Path, record: ClusterInfoRecord, base: Mapping[str, str],
    node: NodeEnv, workdir: str,
) -> dict[str, str]:
    """What hpcdet adds to the trial's environment (the config's variables among them),
    wherever it runs; hpcdet's trial side goes on PYTHONPATH where the trial starts."""
    env = dict(spec.environment)
    env.update(
        {
            CLUSTER_INFO_ENV: str(info_path),
            RUN_DIR_ENV: spec.run_dir,
            "PYTHONUNBUFFERED": "1",
            "DET_CLUSTER_ID": record.cluster_id,
            "DET_EXPERIMENT_ID": str(spec.experiment_id),
            "DET_EXPERIMENT_CONFIG": dumps(spec.config),
            "DET_TRIAL_ID": str(spec.trial_id),
            "DET_TRIAL_RUN_ID": str(spec.run_id),
            "DET_TRIAL_SEED": str(spec.trial_seed),
            "DET_HPARAMS": dumps(spec.hparams),
            "DET_STEPS_COMPLETED": str(spec.steps_completed),
            "DET_WORKDIR": workdir,
            "DET_USER": base.get("USER") or getpass.getuser(),
            "DET_USE_TLS": "false",
            "DET_SLOT_IDS": dumps(record.slot_ids),
            "DET_TASK_TYPE": spec.task_type,
            "DET_TASK_ID": record.task_id,
            "DET_ALLOCATION_ID": record.allocation_id,
            "DET_AGENT_ID": record.agent_id,
            "DET_CHIEF_IP": record.container_addrs[0],
            "DET_RESOURCES_TYPE": node.resources_type,
            # Determined's id of the allocation's resources and of this node's container:
            # the batch job (or the run, off-cluster) and the node's place in it.
            "DET_RESOURCES_ID": node.job_id or record.allocation_id,
            "DET_CONTAINER_ID": f"{node.job_id or record.allocation_id}.{record.container_rank}",
        }
    )
    if spec.latest_checkpoint:
        env["DET_LATEST_CHECKPOINT"] = spec.latest_checkpoint
    # Trials sharing a node must not share rendezvous ports; the user's own settings win.
    # A pilot allocation runs several trials under one job id: it gives each run a key.
    for key, port in trial_ports(base.get("HPCDET_PORT_KEY") or node.job_id
                                 or spec.run_dir).items():
        if key not in base:
            env.setdefault(key, str(port))
    return env


def host_path(base: Mapping[str, str], python_dir: str, overlaid: bool = False) -> str:
    """The trial's PATH: its interpreter's directory first, and not hpcdet's own ``bin/``,
    whose ``pip`` would install into the environment hpcdet runs from; over an overlay
    (whose ``pip`` comes first) its other commands (``torchrun``) stay."""
    own = os.path.dirname(sys.executable)
    kept = [p for p in base.get("PATH", "").split(os.pathsep)
            if p and p != python_dir and (overlaid or p != own)]
    return os.pathsep.join([python_dir, *kept])


def overlay(site_dirs: list[str], python: str, into: Path) -> Path:
    """A private environment over hpcdet's own, for a trial whose interpreter is hpcdet's:
    it sees every package there, and what it installs (``pip`` is its own) goes into the
    overlay, which is deleted with the run's node directory. Returns its ``bin/``."""
    subprocess.run([python, "-I", "-m", "venv", "--without-pip", str(into)],
                   check=True, capture_output=True, cwd="/")
    site = next(into.glob("lib/python*/site-packages"))
    # addsitedir, not a bare path: the .pth files there (editable installs) must work too.
    (site / "_hpcdet_overlay.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({d!r})" for d in site_dirs) + "\n")
    # Shared libraries a package installed next to the environment's lib/python3.X (MPICH's
    # libmpi from PyPI), where it looks for them under the running environment's prefix.
    for lib in {Path(d).parents[1] for d in site_dirs}:
        for entry in lib.iterdir() if lib.is_dir() else ():
            if not entry.name.startswith("python") and not (into / "lib" / entry.name).exists():
                (into / "lib" / entry.name).symlink_to(entry)
    bin_dir = into / "bin"
    for name in ("pip", "pip3", f"pip{sys.version_info[0]}.{sys.version_info[1]}"):
        script = bin_dir / name
        script.write_text('#!/bin/sh\nexec "$(dirname "$0")/python" -m pip "$@"\n')
        script.chmod(0o755)
    return bin_dir


def trial_environment(
    spec: RunSpec, info_path: Path, record: ClusterInfoRecord, base: Mapping[str, str],
    node: NodeEnv, workdir: str, overlay_bin: Path | None = None,
) -> dict[str, str]:
    """The environment of a trial run on the host: the job's, with hpcdet's variables."""
    env = dict(base)
    env.update(trial_variables(spec, info_path, record, base, node, workdir))
    pythonpath = [spec.trialside, env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in pythonpath if p)
    python_dir = str(overlay_bin or Path(spec.python).parent)
    env["PATH"] = host_path(base, python_dir, overlaid=overlay_bin is not None)
    return env


def trial_ports(job_key: str) -> dict[str, int]:
    """Rendezvous ports for one run (Determined's are fixed).

    Jobs of any user share nodes, and every user's first trial is "experiment 1, trial 1", so
    the ports are spread by the scheduler's job id, which no two jobs running at once share:
    consecutive ids get distinct ports. Any other key (a run directory) is hashed. All ports
    stay below 32768, where Linux's ephemeral range for outgoing connections begins.
    """
    spread = (int(job_key) if job_key.isdigit() else zlib.crc32(job_key.encode())) % 4000
    return {
        "INTER_TRAIN_PROCESS_COMM_PORT_1": 20000 + 2 * spread,
        "INTER_TRAIN_PROCESS_COMM_PORT_2": 20000 + 2 * spread + 1,
        "C10D_PORT": 28000 + spread,
    }


def _stamp() -> str:
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")
    return now.replace("+00:00", "Z")


class OutputSink:
    """One place the entrypoint's output is copied to (the node log, the harness's stdout).

    A write that fails (a full disk, a lost mount) drops that output and counts it; the first
    write that works again starts with a line saying how much was dropped and why. The pipe
    keeps being drained whatever happens here, so the trial never blocks on it.
    """

    def __init__(self, opener: Callable[[], int], stamped: bool, owns_fd: bool = True) -> None:
        self._opener = opener
        self._stamped = stamped
        self._owns_fd = owns_fd
        self._fd: int | None = None
        self._midline = False
        self.dropped = 0
        self._reason = ""

    @classmethod
    def file(cls, path: Path) -> OutputSink:
        def opener() -> int:
            path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)

        return cls(opener, stamped=True)

    @classmethod
    def fd(cls, fd: int) -> OutputSink:
        return cls(lambda: fd, stamped=False, owns_fd=False)

    def write_line(self, line: str) -> None:
        prefix = f"{_stamp()} " if self._stamped else ""
        if not (self._note(prefix) and self._write(f"{prefix}{line}\n".encode())):
            self.dropped += len(line.encode()) + 1

    def close(self) -> None:
        self._note(f"{_stamp()} " if self._stamped else "")
        if self._fd is not None and self._owns_fd:
            os.close(self._fd)
        self._fd = None

    def _note(self, prefix: str) -> bool:
        """Say how much was dropped, if anything was; False while that cannot be written."""
        if not self.dropped:
            return True
        note = f"{prefix}[hpcdet: {self.dropped} bytes of output dropped: {self._reason}]\n"
        if not self._write((("\n" if self._midline else "") + note).encode()):
            return False
        self.dropped = 0
        return True

    def _write(self, data: bytes) -> bool:
        """Write all of ``data``; False (and the reason kept) when it did not all fit."""
        done = 0
        try:
            if self._fd is None:
                self._fd = self._opener()
            while done < len(data):
                done += os.write(self._fd, data[done:])
        except OSError as e:
            self._reason = (e.strerror or str(e)).lower()
            self._midline = self._midline if not done else not data[:done].endswith(b"\n")
            return False
        self._midline = False
        return True


def _pump(stream: IO[bytes], sinks: list[OutputSink], tail: deque[str] | None = None) -> None:
    """Copy ``stream`` to ``sinks`` line by line, the last lines also into ``tail``."""
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace").rstrip("\n")
        if tail is not None:
            tail.append(line)
        for sink in sinks:
            sink.write_line(line)
    for sink in sinks:
        sink.close()


def main(argv: list[str]) -> int:
    tighten_umask()  # until the run spec says which: nothing is written before it is read
    run_dir = Path(argv[0])
    spec = RunSpec.load(run_dir)
    os.umask(spec.umask)  # the batch script set it; a site's own template may not
    node = NodeEnv.detect(os.environ)
    rank = node.node_rank

    def preempt_notice(signum: int, _frame: object) -> None:
        if not (run_dir / KILL_FILE).exists():  # the daemon's kill: the trial ends at once
            (run_dir / PREEMPT_FILE).touch()

    signal.signal(signal.SIGUSR2, preempt_notice)
    signal.signal(signal.SIGTERM, preempt_notice)
    if node.deadline is not None and rank == 0:
        deadline_notice(run_dir, node.deadline)

    addrs = rendezvous(run_dir, rank, own_address(node, spec.num_nodes), spec.num_nodes)
    record = ClusterInfoRecord(
        spec=spec.__dict__,
        container_addrs=addrs,
        container_rank=rank,
        slot_ids=list(range(spec.slots_per_node)),
        agent_id=node.node_name or socket.gethostname(),
        allocation_id=f"{spec.trial_id}.{spec.run_id}",
        task_id=f"{spec.experiment_id}.{spec.trial_id}",
        task_type=spec.task_type,
    )
    info_path = layout.node_info(run_dir, rank)
    record.save(info_path)

    # Node-local: the copy of the context the trial works in, and, as needed, its overlay
    # environment and its container's /tmp.
    node_dir = Path(tempfile.mkdtemp(prefix=f"hpcdet-{spec.trial_id}-{spec.run_id}-{rank}-"))
    workdir = node_dir / "work"
    sinks = [OutputSink.file(layout.node_log(run_dir, rank)), OutputSink.fd(sys.stdout.fileno())]

    def write(line: str) -> None:
        for sink in sinks:
            sink.write_line(line)

    def say(line: str) -> None:
        write(f"[hpcdet] {line}")

    steps: HostSteps | None = None
    watch: gpu_watch.GpuWatch | None = None

    try:
        shutil.copytree(spec.context_dir, workdir, symlinks=True)
        hook_done = (layout.node_hook_ok(run_dir, rank)
                     if (workdir / "startup-hook.sh").exists() else None)
        argv_ = entrypoint_argv(spec.entrypoint, hook_done)
        try:
            argv_, env = launch(spec, argv_, info_path, record, node, node_dir, say)
        except ImageError as e:
            say(str(e))
            write_text_atomic(layout.node_launch_failed(run_dir, rank), f"{e}\n")
            write_text_atomic(layout.node_exit(run_dir, rank), "1\n")
            return 1
        if spec.container is not None:
            steps = HostSteps(run_dir, rank, env, write).start()
        child = subprocess.Popen(argv_, cwd=workdir, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT)
        # The trial checkpoints on request; SIGINT still goes through to it.
        signal.signal(signal.SIGINT, lambda s, f: child.send_signal(signal.SIGINT))
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        pump = threading.Thread(target=_pump, args=(child.stdout, sinks, tail), daemon=True)
        pump.start()
        watch = gpu_watch.start(run_dir, rank, env, say)
        rc = child.wait()
        pump.join(timeout=5)
        rc = 128 - rc if rc < 0 else rc
        failed = container_failure(spec, run_dir, rank, rc, list(tail))
        if failed:
            say(failed)
            write_text_atomic(layout.node_launch_failed(run_dir, rank), f"{failed}\n")
        elif hook_done is not None and rc != 0 and not hook_done.exists():
            write_text_atomic(layout.node_hook_failed(run_dir, rank), f"{rc}\n")
            say(f"startup-hook.sh failed with exit code {rc}; the entrypoint did not run")
        write_text_atomic(layout.node_exit(run_dir, rank), f"{rc}\n")
        return rc
    finally:
        if steps is not None:
            steps.stop()
        if watch is not None:
            watch.stop()
        for sink in sinks:
            sink.close()
        shutil.rmtree(node_dir, ignore_errors=True)


def launch(
    spec: RunSpec, argv: list[str], info_path: Path, record: ClusterInfoRecord, node: NodeEnv,
    node_dir: Path, say: Callable[[str], None],
) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run ``argv`` as the trial: in its image, or on the
    host with its own interpreter (over an overlay when that is hpcdet's environment).

    Raises:
        ImageError: the image or its runtime cannot be had here.
    """
    if spec.container is None:
        overlay_bin = (overlay(spec.overlay_of, spec.python, node_dir / "env")
                       if spec.overlay_of else None)
        return argv, trial_environment(spec, info_path, record, os.environ, node,
                                       str(node_dir / "work"), overlay_bin)
    try:
        container = images.locate(ContainerSpec.from_dict(spec.container))
    except ImageError as e:
        raise ImageError(f"the trial cannot start: {e}") from None
    # force_pull_image is the CLI's to honour, once, at create: not every task of an array.
    image = images.ensure(container, say)
    binds = container_binds(spec, container, node_dir)
    added = trial_variables(spec, info_path, record, os.environ, node, WORKDIR)
    # The image's own PYTHONPATH stays, after the trial side: the variable is set inside.
    added.update({IMAGE_ENV: container.image.named, TRIALSIDE_ENV: spec.trialside,
                  PREFIX_ENV: json.dumps(hpcdet_command("hpcdet.launch.host_step"))})
    env = {**os.environ, **added}
    names = passed_names(env, extra=list(added))
    spec_here = replace(container, image=replace(container.image, file=str(image)),
                        binds=tuple(binds))
    # How a rank of a step started on the host enters this node's image (hpcdet.launch.mpi).
    write_atomic(container_record(Path(spec.run_dir), node.node_rank),
                 {"spec": spec_here.to_dict(), "env": added})
    started = layout.node_started(Path(spec.run_dir), node.node_rank)
    started.unlink(missing_ok=True)  # a requeued job's
    command, extra = exec_argv(spec_here, WORKDIR, names, env,
                               with_trialside(argv, started=str(started)),
                               user=(os.geteuid(), os.getegid()))
    say(f"running in {container.image.named} with {container.runtime}")
    return command, {**env, **extra}


def container_failure(spec: RunSpec, run_dir: Path, rank: int, rc: int,
                      tail: list[str]) -> str | None:
    """Why the container runtime failed before the container's first command ran (its own
    message line, ``containers.runtime_failure``), or why the trial cannot start in the image
    (its command is not there, ``containers.missing_command``); None: the trial's own end."""
    if spec.container is None or rc == 0:
        return None
    image = spec.container["image"]["named"]
    if layout.node_started(run_dir, rank).exists():
        return missing_command(image, rc, tail)
    return runtime_failure(spec.container["runtime"], image, rc, tail)


def container_binds(spec: RunSpec, container: ContainerSpec, node_dir: Path) -> list[Bind]:
    """What the container sees of the host: the run directory and the checkpoint storage at
    their own paths, the trial side read-only, the node's copy of the context as the working
    directory, a /tmp of its own, and the config's bind_mounts.

    Raises:
        ImageError: a path that cannot be bound.
    """
    workdir, tmp = node_dir / "work", node_dir / "tmp"
    tmp.mkdir()
    Path(spec.checkpoint_dir).mkdir(parents=True, exist_ok=True)
    mounts = with_workdir(container.binds, WORKDIR)
    for m in mounts:  # a relative container_path: its mount point in our copy of the context
        if m.target.startswith(WORKDIR + "/"):
            (workdir / m.target[len(WORKDIR) + 1:]).mkdir(parents=True, exist_ok=True)
    for path in (spec.run_dir, spec.checkpoint_dir, spec.trialside):
        under = next((d for d in PRIVATE_DIRS if path == d or path.startswith(d + "/")), None)
        if under:
            raise ImageError(f"{path} is under {under}, which every container has of its own: "
                             "keep hpcdet's state directory (HPCDET_HOME) and the checkpoint "
                             "storage on the shared filesystem, outside /tmp")
    for m in mounts:
        if not Path(m.host).exists():
            raise ImageError(f"bind_mounts: host_path {m.host} does not exist on "
                             f"{socket.gethostname()}; create it or fix the path")
    return [Bind(spec.run_dir, spec.run_dir), Bind(spec.checkpoint_dir, spec.checkpoint_dir),
            Bind(spec.trialside, spec.trialside, read_only=True), Bind(str(workdir), WORKDIR),
            *(Bind(str(tmp), d) for d in PRIVATE_DIRS), *mounts]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
