"""``python -m hpcdet.launch.torch_distributed [[TORCH_OVERRIDES...] --] SCRIPT...``

``SCRIPT`` may be ``--trial module:Class`` (a PyTorchTrial): each worker then runs
``hpcdet.pytorch.harness module:Class``.

Runs one ``torchrun`` (``python -m torch.distributed.run``) on every node of the trial; each
starts ``len(slot_ids)`` workers, each worker being SCRIPT under ``wrap_rank RANK``. torchrun
sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` and
``GROUP_WORLD_SIZE``, which ``DistributedContext.from_torch_distributed()`` reads. Arguments
before ``--`` are passed to torchrun after hpcdet's, so they override them (e.g.
``--master_port 29500 --``). ``C10D_PORT`` sets the rendezvous port (default 29400).

Failures: with ``--max_restarts 0`` torchrun stops its node's other workers as soon as one
fails and exits non-zero; this launcher exits with torchrun's code. On Slurm every node's
harness runs in one step with kill-on-bad-exit, so a node that exits non-zero ends the others'
too; where each node's harness is started on its own, the others learn of it from their
collectives.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence

from hpcdet.errors import UsageError

from ._launch import (
    WRAP_RANK_MODULE,
    LaunchError,
    NodeLayout,
    load_layout,
    merged_env,
    report_usage,
    run_forwarding_signals,
    split_overrides,
    trial_script,
)

USAGE = "usage: python3 -m hpcdet.launch.torch_distributed [[TORCH_OVERRIDES...] --] SCRIPT..."
DEFAULT_C10D_PORT = 29400
PORT_ENV = "C10D_PORT"


def master_address(addrs: Sequence[str]) -> str:
    """torchrun's ``--master_addr``: ``localhost`` on one node, else the chief's address."""
    return "localhost" if len(addrs) == 1 else addrs[0]


def master_port(env: Mapping[str, str]) -> int:
    """The rendezvous port: ``$C10D_PORT``, default 29400.

    Raises:
        LaunchError: ``C10D_PORT`` is set but is no port number.
    """
    value = env.get(PORT_ENV, "")
    if not value:
        return DEFAULT_C10D_PORT
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise LaunchError(f"{PORT_ENV}={value!r} is not a port number (1-65535)")
    return int(value)


def build_command(
    *,
    num_nodes: int,
    procs_per_node: int,
    node_rank: int,
    master_addr: str,
    master_port: int,
    script: Sequence[str],
    overrides: Sequence[str] = (),
    python: str = "python3",
) -> list[str]:
    """The torchrun command line for one node.

    Args:
        num_nodes: Nodes in the trial (``--nnodes``).
        procs_per_node: Workers on this node (``--nproc_per_node``).
        node_rank: This node's rank (``--node_rank``).
        master_addr: The rendezvous host (see :func:`master_address`).
        master_port: The rendezvous port.
        script: What each worker runs; it is wrapped in ``wrap_rank RANK``.
        overrides: torchrun options placed after hpcdet's, so they win.
        python: The interpreter that runs torchrun (and, through ``--module``, the workers).
    """
    return [
        python, "-m", "torch.distributed.run",
        "--nnodes", str(num_nodes),
        "--nproc_per_node", str(procs_per_node),
        "--node_rank", str(node_rank),
        "--max_restarts", "0",
        "--master_addr", master_addr,
        "--master_port", str(master_port),
        *overrides,
        "--module", WRAP_RANK_MODULE, "RANK", "--", *script,
    ]  # fmt: skip


def build_env(layout: NodeLayout) -> dict[str, str]:
    """Variables the launcher adds to the workers' environment."""
    return {"USE_TORCH_DISTRIBUTED": "True", "DET_CHIEF_IP": layout.chief_ip}


def command_for(
    layout: NodeLayout,
    env: Mapping[str, str],
    script: Sequence[str],
    overrides: Sequence[str] = (),
    python: str = "python3",
) -> list[str]:
    """:func:`build_command` for this node of ``layout``, with the port from ``env``."""
    return build_command(
        num_nodes=layout.num_nodes,
        procs_per_node=layout.slots_per_node,
        node_rank=layout.node_rank,
        master_addr=master_address(layout.addrs),
        master_port=master_port(env),
        script=script,
        overrides=overrides,
        python=python,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    try:
        overrides, script = split_overrides(sys.argv[1:] if argv is None else argv)
        script = trial_script(sys.executable, script, "torch_distributed")
    except UsageError as e:
        return report_usage(USAGE, e)
    try:
        layout = load_layout(os.environ, "hpcdet.launch.torch_distributed")
        cmd = command_for(layout, os.environ, script, overrides, python=sys.executable)
        if importlib.util.find_spec("torch") is None:
            raise LaunchError(
                f"torch is not installed for {sys.executable}; install it there "
                "(pip install torch) or use another launcher"
            )
    except LaunchError as e:
        print(f"torch_distributed: {e}", file=sys.stderr)
        return 1
    return run_forwarding_signals(cmd, merged_env(os.environ, build_env(layout)))


if __name__ == "__main__":
    sys.exit(main())
