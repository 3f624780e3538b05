"""From an experiment config and a trial to the run spec and the scheduler's job request."""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from hpcdet import containers, trialside
from hpcdet.config import ExperimentConfig
from hpcdet.config.cluster import ClusterConfig
from hpcdet.config.schema import parse_walltime
from hpcdet.containers import Bind, ContainerSpec
from hpcdet.paths import StatePaths
from hpcdet.private import PrivacyError, check_storage, umask_in_force
from hpcdet.rundir.spec import RunSpec
from hpcdet.schedulers.base import ArraySpec, BatchOptions, JobRequest, Placement


def trusted_storage(cfg: ExperimentConfig, paths: StatePaths) -> str | None:
    """Why another user could swap or plant checkpoints in the experiment's checkpoint
    storage on this host (``hpcdet.private.check_storage``), or None: trials restore what is
    there, and `checkpoint download` hands it to the user (issue 37)."""
    storage = cfg.checkpoint_storage
    if storage is not None and storage.type == "directory":
        return None  # a path in the trial's container, not on this host
    directory = cfg.checkpoint_dir(paths.default_checkpoints())
    host = Path(storage.host_path) if storage is not None and storage.host_path else directory
    try:
        check_storage(host, directory)
    except PrivacyError as e:
        return str(e)
    return None


def device_of(placement: Placement, cluster: ClusterConfig) -> str:
    """The device type of a trial's slots: what picks its image and variables."""
    return cluster.slot_type if placement.gpus else "cpu"


def container_spec(cfg: ExperimentConfig, cluster: ClusterConfig, placement: Placement,
                   paths: StatePaths) -> ContainerSpec | None:
    """How the trial runs in ``environment.image``; None when the config names no image."""
    device = device_of(placement, cluster)
    named = cfg.environment.image_for(device)
    if named is None:
        return None
    runtime = cluster.container_runtime
    image = containers.resolve(named, runtime, cluster.image_dir,
                               cluster.image_cache or str(paths.images))
    binds = tuple(Bind(m.host_path, m.container_path, m.read_only,
                       "" if m.propagation == "rprivate" else m.propagation)
                  for m in cfg.bind_mounts)
    return ContainerSpec(runtime, image, device, binds, cfg.environment.force_pull_image,
                         dict(cfg.environment.registry_auth), shutil.which(runtime) or "")


def container_problems(cfg: ExperimentConfig, cluster: ClusterConfig) -> list[str]:
    """What a config asks of its image that the cluster's runtime cannot do."""
    runtime = cluster.container_runtime
    if not cfg.environment.has_image:
        return []
    problems = []
    if cfg.environment.registry_auth and runtime not in ("apptainer", "singularity"):
        problems.append(f"environment.registry_auth: hpcdet passes credentials to apptainer and"
                        f" singularity only; for {runtime}, log in on the nodes with "
                        f"`{runtime} login` and remove registry_auth")
    return problems


# What hpcdet hands a runtime of registry_auth (containers.pull_environment).
_AUTH_APPLIED = ("username", "password")


def container_warnings(cfg: ExperimentConfig, cluster: ClusterConfig) -> list[str]:
    """What a config sets for its image that hpcdet accepts but does not apply."""
    env = cfg.environment
    if not env.has_image:
        return []
    runtime = cluster.container_runtime
    said = [f"bind_mounts[{i}].propagation {m.propagation} is accepted but not applied: "
            f"{runtime} binds take no propagation mode (podman and docker do)"
            for i, m in enumerate(cfg.bind_mounts)
            if m.propagation != "rprivate" and runtime not in containers.OWN_STORE]
    if env.python:
        said.append(f"environment.python {env.python} is accepted but not applied: in "
                    "environment.image the entrypoint runs with the image's own python3")
    said += [f"environment.registry_auth.{key} is accepted but not applied: hpcdet gives "
             f"{runtime} the username and password only"
             for key in env.registry_auth if key not in _AUTH_APPLIED]
    return said


def trial_python(cfg: ExperimentConfig, cluster: ClusterConfig,
                 container: ContainerSpec | None) -> tuple[str, list[str]]:
    """The trial's interpreter, and the site directories to overlay when it is hpcdet's own
    environment's (``RunSpec.overlay_of``)."""
    if container is not None:
        return cfg.environment.python or "python3", []
    # An experiment created before environment.python was filled in at create ran in hpcdet's.
    found = trialside.probe(cfg.environment.python or cluster.python or sys.executable)
    return found.path, list(found.site_dirs) if found.is_hpcdets else []


def walltime(options: BatchOptions, cluster: ClusterConfig) -> int | None:
    return options.walltime_seconds or cluster.walltime_seconds


def run_spec(
    cfg: ExperimentConfig, paths: StatePaths, exp_id: int, trial: dict[str, Any], run_id: int,
    options: BatchOptions, placement: Placement, cluster: ClusterConfig, task: str = "",
) -> RunSpec:
    """``task``: the kind of interactive task the experiment is ("" for an experiment)."""
    container = container_spec(cfg, cluster, placement, paths)
    python, overlay_of = trial_python(cfg, cluster, container)
    return RunSpec(
        experiment_id=exp_id,
        trial_id=trial["id"],
        run_id=run_id,
        trial_seed=trial["trial_seed"],
        hparams=trial["hparams"],
        config=cfg.to_dict(),
        entrypoint=cfg.command,
        context_dir=str(paths.context(exp_id)),
        run_dir=str(paths.run(exp_id, trial["id"], run_id)),
        umask=int(umask_in_force(), 8),
        checkpoint_dir=str(cfg.checkpoint_dir(paths.default_checkpoints())),
        latest_checkpoint=trial.get("latest_checkpoint"),
        steps_completed=trial.get("steps_completed", 0),
        metadata=trial.get("metadata", {}),
        num_nodes=placement.nodes,
        slots_per_node=placement.slots_per_node,
        python=python,
        trialside=str(trialside.ensure(paths.trialside)),
        overlay_of=overlay_of,
        container=container.to_dict() if container else None,
        walltime_seconds=walltime(options, cluster),
        environment=dict(cfg.environment.variables_by_device[device_of(placement, cluster)]),
        task_type=task.upper() or "TRIAL",
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


def pilot_job_name(exp_id: int, index: int) -> str:
    return f"hpcdet-e{exp_id}-pilot{index}"


def pilot_request(
    exp_id: int, index: int, pilot_dir: Path, cfg: ExperimentConfig, cluster: ClusterConfig,
    options: BatchOptions, placement: Placement, nice: int,
) -> JobRequest:
    """The request of an experiment's ``index``-th pilot allocation: ``resources.packing``'s
    slots on one node, of the kind (GPUs or CPUs) a trial's are, for its walltime."""
    packing = cfg.resources.packing or {}
    held = Placement(1, int(packing["slots"]), placement.gpus)
    request = _request(pilot_job_name(exp_id, index), pilot_dir, cfg, cluster, options, None,
                       held, nice)
    limit = parse_walltime(packing["walltime"])
    return replace(request, pilot=True, walltime_seconds=limit,
                   preempt_grace_seconds=min(120, max(10, limit // 4)))


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
