"""What one run of a trial needs on the compute nodes, and what each node knows of itself.

The daemon writes ``RunSpec`` as ``job.json`` into the run directory before it submits. The
harness on each node adds what only the allocation knows (node addresses, rank, slots) and
writes a ``ClusterInfo`` JSON per node; trial code reads it through ``det.get_cluster_info()``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from hpcdet.rundir.atomic import read_json, write_atomic
from hpcdet.rundir.layout import RUN_SPEC_FILE

CLUSTER_INFO_ENV = "HPCDET_CLUSTER_INFO"
RUN_DIR_ENV = "HPCDET_RUN_DIR"


@dataclass
class RunSpec:
    experiment_id: int
    trial_id: int
    run_id: int
    trial_seed: int
    hparams: dict[str, Any]
    config: dict[str, Any]
    entrypoint: str | list[str]
    context_dir: str
    run_dir: str
    checkpoint_dir: str
    latest_checkpoint: str | None = None
    steps_completed: int = 0
    # The trial's train.set_metadata() so far, for get_metadata() in a later run.
    metadata: dict[str, Any] = field(default_factory=dict)
    num_nodes: int = 1
    slots_per_node: int = 1
    # The interpreter trials run with (the user's own; inside an image, the image's), and the
    # read-only tree of hpcdet's trial side it imports (hpcdet.trialside).
    python: str = "python3"
    trialside: str = ""
    # The site directories of hpcdet's own environment when ``python`` is in it: the trial
    # then runs in a private overlay of that environment, so that what it installs stays there.
    overlay_of: list[str] = field(default_factory=list)
    # hpcdet.containers.ContainerSpec as a dict, when the trial runs in an image.
    container: dict[str, Any] | None = None
    walltime_seconds: int | None = None
    environment: dict[str, str] = field(default_factory=dict)
    # The umask hpcdet runs with (0o027 when the cluster config shares with a group): the
    # harness applies it, also under a site's own batch template that sets none.
    umask: int = 0o077
    # Determined's DET_TASK_TYPE: TRIAL, or COMMAND, NOTEBOOK or SHELL for a task.
    task_type: str = "TRIAL"

    def save(self, run_dir: Path) -> None:
        write_atomic(run_dir / RUN_SPEC_FILE, asdict(self))

    @classmethod
    def load(cls, run_dir: Path) -> RunSpec:
        data = read_json(run_dir / RUN_SPEC_FILE)
        if data is None:
            raise FileNotFoundError(run_dir / RUN_SPEC_FILE)
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


# det.get_cluster_info().cluster_id: one name, as no master tells it (it also names the
# TensorBoard directory, rundir.layout.tensorboard_dir).
CLUSTER_ID = "hpcdet"


@dataclass
class ClusterInfoRecord:
    """The per-node facts behind ``det.get_cluster_info()`` (Determined's field names)."""

    spec: dict[str, Any]
    container_addrs: list[str]
    container_rank: int
    slot_ids: list[int]
    agent_id: str
    allocation_id: str
    task_id: str
    cluster_id: str = CLUSTER_ID
    master_url: str = ""
    task_type: str = "TRIAL"

    def save(self, path: Path) -> None:
        write_atomic(path, asdict(self))

    @classmethod
    def load(cls, path: Path) -> ClusterInfoRecord:
        data = read_json(path)
        if data is None:
            raise FileNotFoundError(path)
        return cls(**data)
