"""``python -m hpcdet.launch.torch_distributed [[TORCH_OVERRIDES...] --] SCRIPT...``

``SCRIPT`` may be ``--trial module:Class`` (a PyTorchTrial): each worker then runs
``hpcdet.pytorch.harness module:Class``.

Every worker runs SCRIPT under ``wrap_rank RANK`` with the variables ``torchrun`` sets:
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``,
``GROUP_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` (which
``DistributedContext.from_torch_distributed()`` and ``init_process_group`` read).
``C10D_PORT`` sets the rendezvous port (default 29400; the harness spreads it by job).

* On Slurm the chief starts one job step of one task per worker over the trial's nodes, as the
  MPI launcher does (:mod:`hpcdet.launch.rank_step`), and each worker takes its place from
  Slurm (``SLURM_PROCID``, ``SLURM_LOCALID``, ``SLURM_NODEID``); rank 0 holds the rendezvous
  store. The same DDP loop ran at 0.91x of its srun speed under a torchrun per node here
  (bench/pytorch_ddp.py).
* Elsewhere (PBS, the local backend), or when TORCH_OVERRIDES are given (they are torchrun's
  options, e.g. ``--master_port 29500 --``), one ``torchrun`` (``python -m
  torch.distributed.run``) runs on every node and starts ``len(slot_ids)`` workers there;
  TORCH_OVERRIDES come after hpcdet's options, so they win.

Failures: in the Slurm step a worker that fails ends the step (``--kill-on-bad-exit``); with
``--max_restarts 0`` torchrun stops its node's other workers as soon as one fails and exits
non-zero. The launcher exits with the step's or torchrun's code. On Slurm every node's harness
runs in one step with kill-on-bad-exit, so a node that exits non-zero ends the others' too;
where each node's harness is started on its own, the others learn of it from their
collectives.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from hpcdet.errors import UsageError
from hpcdet.node_env import MpiStep, NodeEnv

from ._launch import (
    RANK_EXITS_ENV,
    WRAP_RANK_MODULE,
    ForwardedSignals,
    LaunchError,
    NodeLayout,
    load_layout,
    merged_env,
    report_usage,
    run_forwarding_signals,
    split_overrides,
    trial_script,
)
from .rank_step import Ranks, run_rank_step

USAGE = "usage: python3 -m hpcdet.launch.torch_distributed [[TORCH_OVERRIDES...] --] SCRIPT..."
DEFAULT_C10D_PORT = 29400
PORT_ENV = "C10D_PORT"
# Seconds the launcher waits for workers still checkpointing after torchrun died of SIGTERM
# (the scheduler's SIGKILL ends the wait sooner where its grace is shorter).
WORKERS_GRACE = 120.0


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


def step_ranks(step: MpiStep, layout: NodeLayout, port: int, script: Sequence[str]) -> Ranks:
    """The workers as tasks of one step: the variables torchrun would set, each worker's
    place from the step's own variables."""
    return Ranks(
        script, "RANK",
        set_vars={
            "WORLD_SIZE": str(layout.num_nodes * layout.slots_per_node),
            "LOCAL_WORLD_SIZE": str(layout.slots_per_node),
            "GROUP_WORLD_SIZE": str(layout.num_nodes),
            "MASTER_ADDR": master_address(layout.addrs),
            "MASTER_PORT": str(port),
            "TORCHELASTIC_RUN_ID": layout.allocation_id,
            "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "0",
            # The rendezvous store is this launcher's (host_store), as it is torchrun's agent's.
            "TORCHELASTIC_USE_AGENT_STORE": "True",
            **build_env(layout),
        },
        copy_vars={"RANK": step.process_var, "LOCAL_RANK": step.local_var,
                   "GROUP_RANK": step.node_var, "ROLE_RANK": step.process_var},
    )


def host_store(layout: NodeLayout, port: int) -> object:
    """The workers' rendezvous store, served by this process for the whole step, as torchrun's
    agent serves it: hosted by rank 0's own process, it went away when rank 0 exited, and a
    worker still shutting down could then abort ("terminate called without an active
    exception") and fail a trial that had finished."""
    from datetime import timedelta

    # Exported only when torch is built with distributed support, which the stubs cannot say.
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    return TCPStore(master_address(layout.addrs), port, is_master=True,
                    wait_for_workers=False, timeout=timedelta(minutes=30))


def _log(message: str) -> None:
    print(f"torch_distributed: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    try:
        overrides, script = split_overrides(sys.argv[1:] if argv is None else argv)
        script = trial_script(sys.executable, script, "torch_distributed")
    except UsageError as e:
        return report_usage(USAGE, e)
    try:
        layout = load_layout(os.environ, "hpcdet.launch.torch_distributed")
        port = master_port(os.environ)
        if importlib.util.find_spec("torch") is None:
            raise LaunchError(
                f"torch is not installed for {sys.executable}; install it there "
                "(pip install torch) or use another launcher"
            )
        env = merged_env(os.environ, build_env(layout))
        step = NodeEnv.detect(os.environ).mpi_step
        if step is not None and not overrides:
            store = host_store(layout, port) if layout.node_rank == 0 else None  # noqa: F841
            return run_rank_step(
                layout, step, "torch", step_ranks(step, layout, port, script),
                overrides=(), env=env, host_env=build_env(layout), python=sys.executable,
                cwd=os.getcwd(), log=_log,
            )
        if step is not None and layout.node_rank == 0:
            _log(f"torchrun options given ({' '.join(overrides)}): one torchrun a node starts "
                 "the workers, not one Slurm task each")
        cmd = command_for(layout, os.environ, script, overrides, python=sys.executable)
    except (LaunchError, TimeoutError) as e:
        print(f"torch_distributed: {e}", file=sys.stderr)
        return 1
    return run_torchrun(cmd, env, layout.slots_per_node)


def run_torchrun(cmd: Sequence[str], env: Mapping[str, str], workers: int) -> int:
    """torchrun's exit code, but 0 where the job's SIGTERM (a preemption, a qdel) made it fail
    though every worker exited 0: torchrun stops its workers on SIGTERM and then fails of the
    signal itself, while the workers, which take it as a request to checkpoint
    (hpcdet.core._preempt), have checkpointed and exited. The run then ends as preempted."""
    with tempfile.TemporaryDirectory(prefix="hpcdet-ranks-") as exits:
        signals = ForwardedSignals()
        code = run_forwarding_signals(cmd, {**env, RANK_EXITS_ENV: exits}, signals)
        termed = code != 0 and signal.SIGTERM in signals.received
        # A second SIGTERM ends torchrun before it has waited for its workers, which go on
        # checkpointing on their own (each leads a process group of its own).
        deadline = time.monotonic() + WORKERS_GRACE
        while termed and len(os.listdir(exits)) < workers and time.monotonic() < deadline:
            time.sleep(0.1)
        codes = [p.read_text().strip() for p in Path(exits).iterdir()]
    if termed and len(codes) == workers and all(c == "0" for c in codes):
        _log(f"torchrun exited {code} of the SIGTERM it got; all {workers} workers on this node "
             "exited 0, so the node's exit code is 0")
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
