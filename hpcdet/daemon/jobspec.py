"""From an experiment config and a trial to the run spec and the scheduler's job request."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import hpcdet
from hpcdet.config import ExperimentConfig
from hpcdet.config.cluster import ClusterConfig
from hpcdet.paths import StatePaths
from hpcdet.private import umask_in_force
from hpcdet.rundir.spec import RunSpec
from hpcdet.schedulers.base import ArraySpec, BatchOptions, JobRequest, Placement


def shim_dir() -> str:
    return str(Path(hpcdet.__file__).parent / "shim")


def walltime(options: BatchOptions, cluster: ClusterConfig) -> int | None:
    return options.walltime_seconds or cluster.walltime_seconds


def run_spec(
    cfg: ExperimentConfig, paths: StatePaths, exp_id: int, trial: dict[str, Any], run_id: int,
    options: BatchOptions, placement: Placement, cluster: ClusterConfig,
) -> RunSpec:
    return RunSpec(
        experiment_id=exp_id,
        trial_id=trial["id"],
        run_id=run_id,
        trial_seed=trial["trial_seed"],
        hparams=trial["hparams"],
        config=cfg.to_dict(),
        entrypoint=cfg.entrypoint,
        context_dir=str(paths.context(exp_id)),
        run_dir=str(paths.run(exp_id, trial["id"], run_id)),
        umask=int(umask_in_force(), 8),
        checkpoint_dir=str(cfg.checkpoint_dir(paths.default_checkpoints())),
        latest_checkpoint=trial.get("latest_checkpoint"),
        steps_completed=trial.get("steps_completed", 0),
        num_nodes=placement.nodes,
        slots_per_node=placement.slots_per_node,
        python=sys.executable,
        shim_dir=shim_dir(),
        walltime_seconds=walltime(options, cluster),
        environment=dict(cfg.environment.variables),
    )


def run_job_name(exp_id: int, trial_id: int, run_id: int) -> str:
    return f"hpcdet-e{exp_id}-t{trial_id}-r{run_id}"


def array_job_name(exp_id: int, index: int) -> str:
    return f"hpcdet-e{exp_id}-array{index}"


def job_request(
    spec: RunSpec, cfg: ExperimentConfig, cluster: ClusterConfig, options: BatchOptions,
    placement: Placement, nice: int,
) -> JobRequest:
    """The request of a single job that runs one run of one trial."""
    return _request(
        run_job_name(spec.experiment_id, spec.trial_id, spec.run_id), Path(spec.run_dir),
        cfg, cluster, options, None, placement, nice,
    )


def array_request(
    exp_id: int, index: int, array_dir: Path, array: ArraySpec, cfg: ExperimentConfig,
    cluster: ClusterConfig, options: BatchOptions, placement: Placement, nice: int,
) -> JobRequest:
    """The request of the ``index``-th job array of an experiment's search."""
    return _request(
        array_job_name(exp_id, index), array_dir, cfg, cluster, options, array, placement, nice
    )


def _request(
    name: str, run_dir: Path, cfg: ExperimentConfig, cluster: ClusterConfig,
    options: BatchOptions, array: ArraySpec | None, placement: Placement, nice: int,
) -> JobRequest:
    limit = walltime(options, cluster)
    return JobRequest(
        name=name,
        run_dir=run_dir,
        python=sys.executable,
        num_nodes=placement.nodes,
        slots_per_node=placement.slots_per_node,
        gpus=placement.gpus,
        gpu_type=options.gpu_type or cluster.gpu_type,
        partition=options.pool or cluster.partition_for(cfg.resources.resource_pool),
        account=options.account or cluster.account,
        qos=options.qos or cluster.qos,
        walltime_seconds=limit,
        # Slurm may signal up to 60 s early; leave the trial a quarter of short walltimes.
        preempt_grace_seconds=min(120, max(10, (limit or 480) // 4)),
        extra_args=list(options.extra_args),
        array=array,
        nice=nice or None,
    )
