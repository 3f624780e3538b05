"""``python -m hpcdet.launch.mpi [[SRUN_OVERRIDES...] --] SCRIPT...``

Native MPI: one rank per slot across the trial's allocation, each rank being SCRIPT under
``wrap_rank``. Ranks find each other through the process manager's PMI, so SCRIPT uses
``mpi4py`` (or any MPI) directly, e.g. with ``DistributedContext.from_mpi4py``.

On Slurm only the chief node's launcher (``container_rank`` 0) starts anything: one job step
inside the batch allocation,

    srun --overlap --mpi=pmi2 --nodes=N --ntasks=N*S --ntasks-per-node=S --cpus-per-task=1
         --distribution=block --kill-on-bad-exit=1 --export=ALL [OVERRIDES]
         <node_step> <wrap_rank> SCRIPT...

* ``--overlap``: the step that runs the harnesses holds every CPU of the allocation until the
  trial ends; without it the new step would wait for CPUs that are never freed.
* ``--ntasks`` and ``--cpus-per-task=1``: srun inherits the harness step's ``SLURM_NTASKS``
  and ``SLURM_CPUS_PER_TASK`` (one task of S CPUs per node) and would size the step by them;
  options given on the command line win over those variables.
* ``--distribution=block``: ranks ``k*S .. k*S+S-1`` on node ``k``, the layout
  ``DistributedContext`` assumes (Slurm 22.05 dealt them out cyclically here without it).
* ``--mpi=pmi2``: Slurm gives every rank its place in the world (``PMI_RANK``, ``PMI_SIZE``,
  ``PMI_FD``); MPICH, the ``mpich`` wheel mpi4py uses, joins through it.
* ``--kill-on-bad-exit=1``: a rank that fails ends the whole step, so none blocks forever on
  a dead peer. srun's exit code is the launcher's: the highest of all ranks', where a rank
  Slurm ended counts as 143 (128 + SIGTERM), so a failure usually surfaces as 143.

The other nodes' launchers start nothing; they wait until the chief's step has ended and then
exit 0 (the chief reports the result). They have to wait because their harness deletes the
node's working directory, where that node's ranks run, when its entrypoint exits; see
:mod:`hpcdet.launch.node_step`, which also puts each rank into its own node's directory and
cluster info.

Without Slurm (the local backend) the trial has one node, and ``mpiexec -n S`` (MPICH's Hydra)
starts the ranks there.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from hpcdet.errors import UsageError

from ._launch import (
    LaunchError,
    NodeLayout,
    load_layout,
    merged_env,
    report_usage,
    run_forwarding_signals,
    split_overrides,
    wrap_rank_command,
)
from .node_step import NodeEntry, claim_step_dir, enter_command, run_step

USAGE = "usage: python3 -m hpcdet.launch.mpi [[SRUN_OVERRIDES...] --] SCRIPT..."
# PMI_RANK comes from PMI (srun --mpi=pmi2, Hydra); SLURM_PROCID covers an --mpi override
# such as pmix, which sets PMIX_RANK instead.
RANK_VARS = "PMI_RANK,SLURM_PROCID"


def build_srun_command(
    *,
    num_nodes: int,
    procs_per_node: int,
    step_dir: Path | str,
    script: Sequence[str],
    overrides: Sequence[str] = (),
    python: str = "python3",
) -> list[str]:
    """The chief's srun command: one MPI step with ``procs_per_node`` ranks on every node.

    Args:
        num_nodes: Nodes in the allocation.
        procs_per_node: Ranks per node (the node's slots).
        step_dir: The launch's directory (see :mod:`hpcdet.launch.node_step`).
        script: What each rank runs.
        overrides: srun options placed after hpcdet's, so they win.
        python: The interpreter that runs node_step and wrap_rank.
    """
    return [
        "srun", "--overlap", "--mpi=pmi2",
        f"--nodes={num_nodes}",
        f"--ntasks={num_nodes * procs_per_node}",
        f"--ntasks-per-node={procs_per_node}",
        "--cpus-per-task=1",
        "--distribution=block",
        "--kill-on-bad-exit=1",
        "--export=ALL",
        *overrides,
        *enter_command(
            python, "SLURM_NODEID", step_dir, wrap_rank_command(python, RANK_VARS, script)
        ),
    ]  # fmt: skip


def build_mpiexec_command(
    *,
    procs: int,
    script: Sequence[str],
    overrides: Sequence[str] = (),
    python: str = "python3",
    mpiexec: str = "mpiexec",
) -> list[str]:
    """The single-node command without Slurm: ``mpiexec -n procs``, then ``overrides``."""
    return [mpiexec, "-n", str(procs), *overrides, *wrap_rank_command(python, RANK_VARS, script)]


def build_env(layout: NodeLayout) -> dict[str, str]:
    """Variables the launcher adds to the ranks' environment."""
    return {"DET_CHIEF_IP": layout.chief_ip}


def _log(message: str) -> None:
    print(f"mpi launcher: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    try:
        overrides, script = split_overrides(sys.argv[1:] if argv is None else argv)
    except UsageError as e:
        return report_usage(USAGE, e)
    try:
        layout = load_layout(os.environ, "hpcdet.launch.mpi")
        env = merged_env(os.environ, build_env(layout))
        if "SLURM_JOB_ID" not in os.environ:
            if layout.num_nodes > 1:
                raise LaunchError(
                    "an MPI step across several nodes needs Slurm (srun); this trial runs "
                    f"on {layout.num_nodes} nodes without it"
                )
            mpiexec = shutil.which("mpiexec")
            if mpiexec is None:
                raise LaunchError("mpiexec is not on PATH; install MPI (pip install mpich)")
            cmd = build_mpiexec_command(
                procs=layout.slots_per_node, script=script, overrides=overrides,
                python=sys.executable, mpiexec=mpiexec,
            )
            return run_forwarding_signals(cmd, env)
        if layout.node_rank == 0 and shutil.which("srun") is None:
            raise LaunchError("srun is not on PATH on the chief node")
        step_dir = claim_step_dir(Path(layout.run_dir), "mpi", layout.node_rank)
        cmd = build_srun_command(
            num_nodes=layout.num_nodes, procs_per_node=layout.slots_per_node,
            step_dir=step_dir, script=script, overrides=overrides, python=sys.executable,
        )
        entry = NodeEntry.here(os.getcwd(), os.environ)
        return run_step(layout, step_dir, entry, cmd, env, run_forwarding_signals, _log)
    except (LaunchError, TimeoutError) as e:
        print(f"mpi launcher: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
