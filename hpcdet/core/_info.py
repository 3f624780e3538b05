"""What a task knows about itself on the cluster: Determined's ``det.get_cluster_info()``.

The harness on each node writes a :class:`~hpcdet.rundir.spec.ClusterInfoRecord` (whose
``spec`` is the run's :class:`~hpcdet.rundir.spec.RunSpec`) and points ``HPCDET_CLUSTER_INFO``
at it. Without that variable the process is off-cluster and :func:`get_cluster_info` returns
``None``.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from hpcdet.rundir.spec import CLUSTER_INFO_ENV, ClusterInfoRecord, RunSpec

# The files of a run directory the Core API touches (layout in hpcdet.paths).


@dataclass(frozen=True)
class TrialInfo:
    """Facts about the trial a TRIAL task runs (Determined's ``det.TrialInfo``).

    Attributes:
        trial_id: The trial's id, stable across restarts and resumptions.
        experiment_id: The experiment the trial belongs to.
        trial_seed: The seed the searcher chose for this trial.
        hparams: The trial's hyperparameter values.
        _config: The full experiment config; like Determined's, not a stable interface.
        _steps_completed: Steps the trial had completed when this run started.
        _trial_run_id: Which submission of the trial this process belongs to.
    """

    trial_id: int
    experiment_id: int
    trial_seed: int
    hparams: dict[str, Any]
    _config: dict[str, Any]
    _steps_completed: int
    _trial_run_id: int
    _debug: bool = False
    _inter_node_network_interface: str | None = None


class ClusterInfo:
    """Determined's ``det.ClusterInfo``, read from the record the hpcdet harness wrote.

    Attributes:
        master_url: Always ``""``: hpcdet has no master; the daemon is reached through files.
        cluster_id: The cluster's name (``"hpcdet"`` unless the harness says otherwise).
        agent_id: The node's host name.
        slot_ids: The slots (GPUs or CPU slots) of this node given to the task.
        task_id: The task's id.
        allocation_id: The id of this run's allocation.
        session_token: Always ``""``: there is no master session.
        task_type: ``"TRIAL"`` for trials; other task types get no trial facts.
    """

    def __init__(self, record: ClusterInfoRecord, spec: RunSpec) -> None:
        self.master_url = record.master_url
        self.cluster_id = record.cluster_id
        self.agent_id = record.agent_id
        self.slot_ids = list(record.slot_ids)
        self.task_id = record.task_id
        self.allocation_id = record.allocation_id
        self.session_token = ""
        self.task_type = record.task_type
        self.master_cert_name: str | None = None
        self.master_cert_file: str | None = None
        self._record = record
        self._spec = spec

    @property
    def latest_checkpoint(self) -> str | None:
        """The uuid of the checkpoint to resume from, or ``None`` (always for non-trials)."""
        return self._spec.latest_checkpoint if self.task_type == "TRIAL" else None

    @property
    def user_data(self) -> dict[str, Any]:
        """The experiment config's ``data`` section, or ``{}``."""
        if self.task_type != "TRIAL":
            return {}
        return dict(self._spec.config.get("data") or {})

    @functools.cached_property
    def trial(self) -> TrialInfo:
        """Trial facts; raises ``RuntimeError`` for a task that is not a trial."""
        if self.task_type != "TRIAL":
            raise RuntimeError(
                f"ClusterInfo.trial is only available in trials, not in a {self.task_type} task"
            )
        spec = self._spec
        return TrialInfo(
            trial_id=spec.trial_id,
            experiment_id=spec.experiment_id,
            trial_seed=spec.trial_seed,
            hparams=spec.hparams,
            _config=spec.config,
            _steps_completed=spec.steps_completed,
            _trial_run_id=spec.run_id,
            _debug=bool(spec.config.get("debug", False)),
        )

    @property
    def container_addrs(self) -> list[str]:
        """The address of every node of the allocation, in node-rank order."""
        return list(self._record.container_addrs)

    @property
    def container_rank(self) -> int:
        """This node's rank among ``container_addrs``."""
        return self._record.container_rank

    @property
    def container_slot_counts(self) -> list[int]:
        """Slots per node, in node-rank order."""
        return [len(self._record.slot_ids)] * len(self._record.container_addrs)

    @property
    def gpu_uuids(self) -> list[str]:
        """Always empty: the scheduler, not hpcdet, binds GPUs (see ``CUDA_VISIBLE_DEVICES``)."""
        return []

    @property
    def _run_dir(self) -> Path:
        return Path(self._spec.run_dir)

    @property
    def _checkpoint_dir(self) -> Path:
        return Path(self._spec.checkpoint_dir)


def get_cluster_info() -> ClusterInfo | None:
    """The running task's cluster info, or ``None`` off-cluster.

    The record named by ``$HPCDET_CLUSTER_INFO`` is read once per path and cached.

    Raises:
        RuntimeError: The variable is set but names a missing or malformed record; running
            off-cluster instead would silently lose every report.
    """
    path = os.environ.get(CLUSTER_INFO_ENV)
    if not path:
        return None
    return _load(path)


@functools.cache
def _load(path: str) -> ClusterInfo:
    try:
        record = ClusterInfoRecord.load(Path(path))
    except FileNotFoundError:
        raise RuntimeError(
            f"{CLUSTER_INFO_ENV}={path}, but that file does not exist; the hpcdet harness "
            f"writes it before it starts the entrypoint (unset {CLUSTER_INFO_ENV} to run "
            "off-cluster)"
        ) from None
    except (TypeError, ValueError) as e:
        raise RuntimeError(f"{path} is not a valid hpcdet cluster info record: {e}") from e
    names = {f.name for f in fields(RunSpec)}
    try:
        spec = RunSpec(**{k: v for k, v in record.spec.items() if k in names})
    except TypeError as e:
        raise RuntimeError(f"the run spec in {path} is incomplete: {e}") from e
    return ClusterInfo(record, spec)
