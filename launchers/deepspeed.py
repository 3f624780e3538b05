"""``python -m hpcdet.launch.deepspeed [[DEEPSPEED_ARGS...] --] SCRIPT...``

Runs SCRIPT under the ``deepspeed`` launcher, one worker per slot, each under ``wrap_rank
RANK``; ``DistributedContext.from_deepspeed()`` reads the variables deepspeed sets. Every node
writes the hostfile ``$TMPDIR/hpcdet-<uid>/hostfile-<allocation_id>.txt`` (``<host> slots=N``
per node, ``localhost`` when the trial has one node) and exports its path as
``DET_DEEPSPEED_HOSTFILE_PATH``; the chief node then runs

    deepspeed -H HOSTFILE --master_addr ADDR --no_python --no_local_rank --no_ssh_check
              [DEEPSPEED_ARGS] -- <wrap_rank RANK> SCRIPT...

Several nodes: deepspeed's default runner reaches the other nodes with pdsh over ssh, which
the cluster has to allow between the allocation's nodes (hpcdet starts no sshd). The chief
writes ``.deepspeed_env`` so the remote workers get the trial's variables, and each worker
enters its own node's directory and cluster info first (:mod:`hpcdet.launch.node_step`, keyed
by deepspeed's ``CROSS_RANK``). The other nodes' launchers wait until the chief's run ends.

deepspeed is not a dependency of hpcdet: without a ``deepspeed`` command on PATH the launcher
exits 1 and says so.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from hpcdet.errors import UsageError
from hpcdet.node_env import PER_PROCESS_VARS
from hpcdet.private import PrivacyError, private_dir
from hpcdet.rundir.atomic import write_text_atomic

from ._launch import (
    LaunchError,
    NodeLayout,
    load_layout,
    merged_env,
    report_usage,
    run_forwarding_signals,
    split_overrides,
    trial_script,
    wrap_rank_command,
)
from .node_step import NodeEntry, claim_step_dir, enter_command, run_step

USAGE = "usage: python3 -m hpcdet.launch.deepspeed [[DEEPSPEED_ARGS...] --] SCRIPT..."
HOSTFILE_ENV = "DET_DEEPSPEED_HOSTFILE_PATH"
ENV_FILE = ".deepspeed_env"
# Variables that describe one node or one process; copying the chief's to every worker
# would mislead the others.
_NOT_SHARED = re.compile("|".join((
    r"BASH_FUNC_.*", "OLDPWD", "HOSTNAME", r".*CUDA_VISIBLE_DEVICES", "DET_SLOT_IDS",
    "DET_AGENT_ID", *PER_PROCESS_VARS,
)))


def hostfile_text(addrs: Sequence[str], slots_per_node: int) -> str:
    """deepspeed's hostfile: ``<host> slots=N`` per node; ``localhost`` for a single node."""
    hosts = ["localhost"] if len(addrs) == 1 else list(addrs)
    return "".join(f"{host} slots={slots_per_node}\n" for host in hosts)


def hostfile_path(allocation_id: str, tmpdir: str | Path) -> Path:
    """Where every node writes the hostfile; unique per trial run, the same on every node
    (the chief's path reaches the others' workers), and in a directory of the user's alone:
    in a shared /tmp another user could put a file or a symlink at the name first."""
    return Path(tmpdir) / f"hpcdet-{os.getuid()}" / f"hostfile-{allocation_id}.txt"


def master_address(addrs: Sequence[str]) -> str:
    """``--master_addr``: ``localhost`` on one node, else the chief's address."""
    return "localhost" if len(addrs) == 1 else addrs[0]


def build_command(
    *,
    hostfile: Path | str,
    master_addr: str,
    script: Sequence[str],
    overrides: Sequence[str] = (),
    python: str = "python3",
    step_dir: Path | str | None = None,
) -> list[str]:
    """The chief's deepspeed command.

    Args:
        hostfile: The hostfile every node wrote.
        master_addr: See :func:`master_address`.
        script: What each worker runs; it is wrapped in ``wrap_rank RANK``.
        overrides: deepspeed options placed after hpcdet's, so they win.
        python: The interpreter that runs wrap_rank (and node_step).
        step_dir: For several nodes, the launch's directory: workers then start through
            ``node_step`` to enter their own node's directory and cluster info.
    """
    worker = wrap_rank_command(python, "RANK", script)
    if step_dir is not None:
        worker = enter_command(python, "CROSS_RANK", step_dir, worker)
    return [
        "deepspeed", "-H", str(hostfile),
        "--master_addr", master_addr,
        "--no_python", "--no_local_rank", "--no_ssh_check",
        *overrides, "--", *worker,
    ]  # fmt: skip


def build_env(layout: NodeLayout, hostfile: Path | str, env: Mapping[str, str]) -> dict[str, str]:
    """Variables the launcher adds to the workers' environment.

    ``NCCL_SOCKET_IFNAME`` follows ``DET_INTER_NODE_NETWORK_INTERFACE`` when GPUs are visible
    and the user did not set it.
    """
    extra = {
        HOSTFILE_ENV: str(hostfile),
        "DET_CHIEF_IP": layout.chief_ip,
        "USE_DEEPSPEED": "1",
    }
    iface = env.get("DET_INTER_NODE_NETWORK_INTERFACE", "").strip()
    uses_gpus = bool(env.get("CUDA_VISIBLE_DEVICES", "").strip())
    if iface and uses_gpus and not env.get("NCCL_SOCKET_IFNAME", "").strip():
        extra["NCCL_SOCKET_IFNAME"] = iface
    return extra


def deepspeed_env_lines(env: Mapping[str, str]) -> list[str]:
    """Lines of ``.deepspeed_env``: every shareable variable as ``NAME=<shell-quoted value>``.

    deepspeed reads the file line by line, so values with line breaks are left out.
    """
    lines = []
    for key, value in env.items():
        if _NOT_SHARED.fullmatch(key) or "\n" in value or "\r" in value:
            continue
        lines.append(f"{key}={shlex.quote(value)}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    try:
        overrides, script = split_overrides(sys.argv[1:] if argv is None else argv)
        script = trial_script(sys.executable, script, "deepspeed")
    except UsageError as e:
        return report_usage(USAGE, e)
    try:
        if shutil.which("deepspeed") is None:
            raise LaunchError(
                "the deepspeed command is not on PATH; install DeepSpeed for "
                f"{sys.executable} (pip install deepspeed) or use another launcher"
            )
        layout = load_layout(os.environ, "hpcdet.launch.deepspeed")
        hostfile = hostfile_path(layout.allocation_id, tempfile.gettempdir())
        private_dir(hostfile.parent)  # 0700 and ours, or refused saying whose it is
        write_text_atomic(hostfile, hostfile_text(layout.addrs, layout.slots_per_node))
        env = merged_env(os.environ, build_env(layout, hostfile, os.environ))
        master = master_address(layout.addrs)
        if layout.num_nodes == 1:
            cmd = build_command(hostfile=hostfile, master_addr=master, script=script,
                                overrides=overrides, python=sys.executable)
            return run_forwarding_signals(cmd, env)
        step_dir = claim_step_dir(Path(layout.run_dir), "deepspeed", layout.node_rank)
        cmd = build_command(hostfile=hostfile, master_addr=master, script=script,
                            overrides=overrides, python=sys.executable, step_dir=step_dir)
        if layout.node_rank == 0:
            Path(ENV_FILE).write_text("".join(f"{line}\n" for line in deepspeed_env_lines(env)))
        entry = NodeEntry.here(os.getcwd(), os.environ)
        return run_step(layout, step_dir, entry, cmd, env, run_forwarding_signals)
    except (LaunchError, TimeoutError, PrivacyError) as e:
        print(f"deepspeed launcher: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
