"""``python -m hpcdet.launch.mpi [[STEP_OVERRIDES...] --] SCRIPT...``

Native MPI: one rank per slot across the trial's allocation, each rank being SCRIPT under
``wrap_rank``. Ranks find each other through the process manager's PMI, so SCRIPT uses
``mpi4py`` (or any MPI) directly, e.g. with ``DistributedContext.from_mpi4py``.

Across several nodes only the chief node's launcher (``container_rank`` 0) starts anything:
one MPI step over the allocation, as the batch system starts one (``hpcdet.node_env.MpiStep``,
whose options are explained there), each rank being ``<node_step> <wrap_rank> SCRIPT...``.

The other nodes' launchers start nothing; they wait until the chief's step has ended and then
exit 0 (the chief reports the result). They have to wait because their harness deletes the
node's working directory, where that node's ranks run, when its entrypoint exits; see
:mod:`hpcdet.launch.node_step`, which also puts each rank into its own node's directory and
cluster info.

On one node without such a step (the local backend) ``mpiexec -n S`` (MPICH's Hydra) starts
the ranks there.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from hpcdet.errors import UsageError
from hpcdet.node_env import MpiStep, NodeEnv

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
from .host_step import PREFIX_ENV, ask_host, rank_prefix
from .node_step import NodeEntry, Runner, claim_step_dir, enter_command, run_step

USAGE = "usage: python3 -m hpcdet.launch.mpi [[STEP_OVERRIDES...] --] SCRIPT..."
# Hydra's PMI gives each rank PMI_RANK.
MPIEXEC_RANK_VARS = "PMI_RANK"


def build_step_command(
    step: MpiStep,
    *,
    num_nodes: int,
    procs_per_node: int,
    step_dir: Path | str,
    script: Sequence[str],
    overrides: Sequence[str] = (),
    python: str = "python3",
    rank_prefix: Sequence[str] = (),
) -> list[str]:
    """The chief's command: one MPI step with ``procs_per_node`` ranks on every node.

    Args:
        step: How the batch system starts a step over the job's nodes.
        num_nodes: Nodes in the allocation.
        procs_per_node: Ranks per node (the node's slots).
        step_dir: The launch's directory (see :mod:`hpcdet.launch.node_step`).
        script: What each rank runs.
        overrides: options of the step's tool placed after hpcdet's, so they win.
        python: The interpreter that runs node_step and wrap_rank.
        rank_prefix: What starts each rank (in the trial's image: ``hpcdet.launch.host_step``).
    """
    ranks = enter_command(python, step.node_var, step_dir,
                          wrap_rank_command(python, step.rank_vars, script))
    return step.command(num_nodes, procs_per_node, overrides, [*rank_prefix, *ranks])


def build_mpiexec_command(
    *,
    procs: int,
    script: Sequence[str],
    overrides: Sequence[str] = (),
    python: str = "python3",
    mpiexec: str = "mpiexec",
) -> list[str]:
    """The single-node command: ``mpiexec -n procs``, then ``overrides``."""
    return [mpiexec, "-n", str(procs), *overrides,
            *wrap_rank_command(python, MPIEXEC_RANK_VARS, script)]


def build_env(layout: NodeLayout) -> dict[str, str]:
    """Variables the launcher adds to the ranks' environment."""
    return {"DET_CHIEF_IP": layout.chief_ip}


def _log(message: str) -> None:
    print(f"mpi launcher: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    try:
        overrides, script = split_overrides(sys.argv[1:] if argv is None else argv)
        script = trial_script(sys.executable, script, "mpi")
    except UsageError as e:
        return report_usage(USAGE, e)
    try:
        layout = load_layout(os.environ, "hpcdet.launch.mpi")
        env = merged_env(os.environ, build_env(layout))
        step = NodeEnv.detect(os.environ).mpi_step
        if step is None:
            if layout.num_nodes > 1:
                raise LaunchError(
                    "an MPI step across several nodes needs a batch system that starts one "
                    f"(see hpcdet.node_env); this trial runs on {layout.num_nodes} nodes "
                    "without one"
                )
            mpiexec = shutil.which("mpiexec")
            if mpiexec is None:
                raise LaunchError("mpiexec is not on PATH; install MPI (pip install mpich)")
            cmd = build_mpiexec_command(
                procs=layout.slots_per_node, script=script, overrides=overrides,
                python=sys.executable, mpiexec=mpiexec,
            )
            return run_forwarding_signals(cmd, env)
        # In an image the step starts on the host, through the harness, and each rank enters
        # the image again (hpcdet.launch.host_step).
        on_host = os.environ.get(PREFIX_ENV)
        if layout.node_rank == 0 and not on_host and shutil.which(step.tool) is None:
            raise LaunchError(f"{step.tool} is not on PATH on the chief node")
        step_dir = claim_step_dir(Path(layout.run_dir), "mpi", layout.node_rank)
        prefix = rank_prefix(layout.run_dir, step.node_var, json.loads(on_host)) if on_host else []
        cmd = build_step_command(
            step, num_nodes=layout.num_nodes, procs_per_node=layout.slots_per_node,
            step_dir=step_dir, script=script, overrides=overrides, python=sys.executable,
            rank_prefix=prefix,
        )
        entry = NodeEntry.here(os.getcwd(), os.environ)
        runner: Runner = run_forwarding_signals
        if on_host:
            def runner(cmd: Sequence[str], env: Mapping[str, str]) -> int:
                return ask_host(step_dir, layout.node_rank, cmd, build_env(layout))
        return run_step(layout, step_dir, entry, cmd, env, runner, _log)
    except (LaunchError, TimeoutError) as e:
        print(f"mpi launcher: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
