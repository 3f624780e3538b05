"""``python -m hpcdet.launch.mpi [[STEP_OVERRIDES...] --] SCRIPT...``

Native MPI: one rank per slot across the trial's allocation, each rank being SCRIPT under
``wrap_rank``. Ranks find each other through the process manager's PMI, so SCRIPT uses
``mpi4py`` (or any MPI) directly, e.g. with ``DistributedContext.from_mpi4py``.

Where the batch system starts one step over the allocation (``hpcdet.node_env.MpiStep``,
whose options are explained there), only the chief node's launcher (``container_rank`` 0)
starts anything: that step, each rank being ``<node_step> <wrap_rank> SCRIPT...``
(:mod:`hpcdet.launch.rank_step`). The other nodes' launchers wait until the chief's step has
ended and then exit 0 (the chief reports the result). They have to wait because their harness
deletes the node's working directory, where that node's ranks run, when its entrypoint exits;
see :mod:`hpcdet.launch.node_step`, which also puts each rank into its own node's directory
and cluster info.

On one node without such a step (the local backend) ``mpiexec -n S`` (MPICH's Hydra) starts
the ranks there.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence

from hpcdet.errors import UsageError
from hpcdet.node_env import NodeEnv

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
from .rank_step import Ranks, run_rank_step

USAGE = "usage: python3 -m hpcdet.launch.mpi [[STEP_OVERRIDES...] --] SCRIPT..."
# Hydra's PMI gives each rank PMI_RANK.
MPIEXEC_RANK_VARS = "PMI_RANK"


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
        return run_rank_step(
            layout, step, "mpi", Ranks(script, step.rank_vars), overrides=overrides, env=env,
            host_env=build_env(layout), python=sys.executable, cwd=os.getcwd(), log=_log,
        )
    except (LaunchError, TimeoutError) as e:
        print(f"mpi launcher: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
