"""Where a harness runs, read from what its batch system sets (pure functions of a mapping).

One constructor per scheduler; ``NodeEnv.detect`` picks by the variables present. The harness
and the launchers learn their node rank, the job, the array index and the walltime deadline
here and nowhere else. Trial-side: standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Set by hpcdet's own batch scripts: the node's rank where the scheduler gives none (local,
# PBS's pbsdsh), and when the trial must be told to checkpoint (PBS sends no signal before the
# walltime; the script computes it from the job's start).
NODE_RANK_VAR = "HPCDET_NODE_RANK"
DEADLINE_VAR = "HPCDET_DEADLINE"
# PBS: the first host of $PBS_NODEFILE (the chief's) and the task's own host. pbsdsh's task on
# the first node has no PBS_NODEFILE (measured on OpenPBS 23.06.06), and the chief's own host
# name may resolve to a loopback address there, so the script passes both on the command line.
CHIEF_HOST_VAR = "HPCDET_CHIEF_HOST"
NODE_NAME_VAR = "HPCDET_NODE_NAME"


@dataclass(frozen=True)
class MpiStep:
    """How a batch system starts one step of ranks over all of a job's nodes from the chief
    node: the MPI launcher's ranks, and torch_distributed's workers where the batch system
    tells each process its place (``process_var``, ``local_var``).

    Slurm: one job step inside the allocation,

        srun --overlap --mpi=pmi2 --nodes=N --ntasks=N*S --ntasks-per-node=S --cpus-per-task=C
             --distribution=block --kill-on-bad-exit=1 --export=ALL [OVERRIDES] COMMAND...

    * ``--overlap``: the step that runs the harnesses holds every CPU of the allocation until
      the trial ends; without it the new step would wait for CPUs that are never freed.
    * ``--ntasks`` and ``--cpus-per-task``: srun inherits the harness step's ``SLURM_NTASKS``
      and ``SLURM_CPUS_PER_TASK`` (one task of S CPUs per node) and would size the step by
      them; options given on the command line win over those variables. Each rank gets its
      share of the node's CPUs (``SLURM_CPUS_ON_NODE`` // S, at least 1): one CPU per CPU
      slot, and a GPU rank its data loader's CPUs.
    * ``--distribution=block``: ranks ``k*S .. k*S+S-1`` on node ``k``, the layout
      ``DistributedContext`` assumes (Slurm 22.05 dealt them out cyclically here without it).
    * ``--mpi=pmi2``: Slurm gives every rank its place in the world (``PMI_RANK``,
      ``PMI_SIZE``, ``PMI_FD``); MPICH, the ``mpich`` wheel mpi4py uses, joins through it.
    * ``--kill-on-bad-exit=1``: a rank that fails ends the whole step, so none blocks forever
      on a dead peer. srun's exit code is the highest of all ranks', where a rank Slurm ended
      counts as 143 (128 + SIGTERM), so a failure usually surfaces as 143.
    """

    tool: str  # the program the chief runs; it must be on PATH there
    node_var: str  # tells each rank which node it is on
    rank_vars: str  # where a rank finds its place in the world, first found wins
    process_var: str  # the rank's place among all ranks of the step, whatever the MPI
    local_var: str  # the rank's place among its node's ranks
    cpus_var: str  # the job's CPUs on this node
    before: tuple[str, ...]  # options before the step's size
    after: tuple[str, ...]  # options after it

    def command(self, num_nodes: int, procs_per_node: int, overrides: Sequence[str],
                ranks: Sequence[str], cpus_per_rank: int = 1) -> list[str]:
        """The step's command line: ``ranks`` (what every rank runs) last, the caller's
        ``overrides`` after hpcdet's options so that they win."""
        return [
            self.tool, *self.before,
            f"--nodes={num_nodes}",
            f"--ntasks={num_nodes * procs_per_node}",
            f"--ntasks-per-node={procs_per_node}",
            f"--cpus-per-task={cpus_per_rank}",
            *self.after, *overrides, *ranks,
        ]  # fmt: skip

    def cpus_per_rank(self, env: Mapping[str, str], procs_per_node: int) -> int:
        """Each of a node's ``procs_per_node`` ranks' share of the job's CPUs there."""
        cpus = _int(env.get(self.cpus_var))
        return max(1, (cpus or 0) // max(1, procs_per_node))


# PMI_RANK comes from PMI (srun --mpi=pmi2); SLURM_PROCID covers an --mpi override such as
# pmix, which sets PMIX_RANK instead.
SLURM_MPI_STEP = MpiStep(
    tool="srun", node_var="SLURM_NODEID", rank_vars="PMI_RANK,SLURM_PROCID",
    process_var="SLURM_PROCID", local_var="SLURM_LOCALID", cpus_var="SLURM_CPUS_ON_NODE",
    before=("--overlap", "--mpi=pmi2"),
    after=("--distribution=block", "--kill-on-bad-exit=1", "--export=ALL"),
)

# Variables that describe one process of a job step, not the node: a launcher that copies the
# chief's environment to the other nodes leaves them out.
PER_PROCESS_VARS = ("SLURM_PROCID",)


@dataclass(frozen=True)
class NodeEnv:
    """One node of one job, as the batch system describes it."""

    scheduler: str  # "slurm", "pbs" or "local"
    resources_type: str  # Determined's DET_RESOURCES_TYPE
    job_id: str  # the job's number ("" off-cluster)
    node_rank: int
    node_name: str  # "" if the scheduler does not say
    nodes: tuple[str, ...] = ()  # the job's hosts in order, when the scheduler lists them
    array_index: int | None = None
    deadline: float | None = None  # epoch seconds by which the trial should have checkpointed
    route_to: str | None = None  # an address on the network the job's nodes share
    mpi_step: MpiStep | None = None  # how one MPI step spans the job's nodes (None: it cannot)

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> NodeEnv:
        if "SLURM_JOB_ID" in env:
            return cls.from_slurm(env)
        if "PBS_JOBID" in env:
            return cls.from_pbs(env)
        return cls.from_local(env)

    @classmethod
    def from_slurm(cls, env: Mapping[str, str]) -> NodeEnv:
        return cls(
            scheduler="slurm", resources_type="slurm-job", job_id=env.get("SLURM_JOB_ID", ""),
            node_rank=_first_int(env, "SLURM_NODEID", NODE_RANK_VAR),
            node_name=env.get("SLURMD_NODENAME", ""),
            array_index=_int(env.get("SLURM_ARRAY_TASK_ID")),
            deadline=_float(env.get(DEADLINE_VAR)),
            route_to=env.get("SLURM_LAUNCH_NODE_IPADDR") or None,
            mpi_step=SLURM_MPI_STEP,
        )

    @classmethod
    def from_pbs(cls, env: Mapping[str, str]) -> NodeEnv:
        # PBS_JOBID is "123.server" or "123[4].server"; the number alone spreads ports.
        job = env.get("PBS_JOBID", "")
        nodes = _unique_hosts(env.get("PBS_NODEFILE"))
        return cls(
            scheduler="pbs", resources_type="pbs-job", job_id=job.split(".")[0].split("[")[0],
            node_rank=_first_int(env, NODE_RANK_VAR),
            node_name=env.get(NODE_NAME_VAR, ""),
            nodes=nodes,
            route_to=env.get(CHIEF_HOST_VAR) or (nodes[0] if nodes else None),
            array_index=_int(env.get("PBS_ARRAY_INDEX")),
            deadline=_float(env.get(DEADLINE_VAR)),
        )

    @classmethod
    def from_local(cls, env: Mapping[str, str]) -> NodeEnv:
        return cls(scheduler="local", resources_type="local", job_id="",
                   node_rank=_first_int(env, NODE_RANK_VAR), node_name="",
                   deadline=_float(env.get(DEADLINE_VAR)))


def _first_int(env: Mapping[str, str], *keys: str) -> int:
    """The first of ``keys`` that holds a number (0 if none does)."""
    return next((int(env[k]) for k in keys if env.get(k, "").isdigit()), 0)


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _unique_hosts(nodefile: str | None) -> tuple[str, ...]:
    """$PBS_NODEFILE's hosts in order, once each (it has a line per MPI process)."""
    if not nodefile:
        return ()
    try:
        lines = Path(nodefile).read_text().split()
    except OSError:
        return ()
    return tuple(dict.fromkeys(lines))
