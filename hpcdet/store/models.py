"""SQLite tables: the daemon's index of the run tree.

Annotations use ``Optional`` because SQLModel evaluates them at runtime and hpcdet supports
Python 3.9, where ``int | None`` cannot be evaluated.
"""

import json
from typing import Any, NamedTuple, Optional

from sqlalchemy import Index
from sqlmodel import Field, SQLModel


class Experiment(SQLModel, table=True):
    id: int = Field(primary_key=True)
    name: str
    state: str = "ACTIVE"
    config_json: str
    description: str = ""
    labels_json: str = "[]"
    archived: bool = False
    resource_pool: str = ""
    priority: Optional[int] = None
    weight: float = 1.0  # fair share: stored and shown, not applied (no per-job equivalent)
    position: float = 0.0  # place in hpcdet's queue among equal priorities
    backend: str = "local"
    searcher: str = "single"
    created: float
    ended: Optional[float] = None
    journal_offset: int = 0
    progress: float = 0.0
    actions_done: int = 0  # searcher decisions carried out so far
    searcher_done: bool = False
    error: str = ""
    # The create request that made it (chosen by the CLI, or by a laptop that may send it
    # again after a dropped connection): a request carried out twice answers the same.
    request_id: str = Field(default="", index=True, sa_column_kwargs={"server_default": ""})
    # "" for an experiment; command, notebook or shell (hpcdet.config.task). A server default
    # too: rows inserted in bulk (the benches' seeds) name only the columns they set.
    task: str = Field(default="", sa_column_kwargs={"server_default": ""})
    # What the daemon advises once the first runs ended (hpcdet.short_jobs), "" for nothing.
    advice: str = Field(default="", sa_column_kwargs={"server_default": ""})


class Trial(SQLModel, table=True):
    id: int = Field(primary_key=True)
    experiment_id: int = Field(index=True, foreign_key="experiment.id")
    request_id: int = 0  # the searcher's name for it: 0, 1, 2, ... per experiment
    ops_json: str = "[]"  # 0.37 operation lengths issued by the searcher, in order
    ops_completed: int = 0
    closed: bool = False  # 0.37: no more operations will come
    stop_requested: bool = False  # 0.38: the searcher stopped it
    early_exit: str = ""
    exit_reported: bool = False  # the searcher has been told the trial ended
    state: str = "ACTIVE"
    hparams_json: str = "{}"
    trial_seed: int = 0
    restarts: int = 0
    run_id: int = 0
    latest_checkpoint: Optional[str] = None
    steps_completed: int = 0
    progress: float = 0.0
    status: str = ""  # the trial's last train.set_status()
    metadata_json: str = "{}"  # train.set_metadata(), merged
    alerts_json: str = "[]"  # core_context.alert() calls, oldest first
    best_validation: Optional[float] = None
    end_reason: str = ""
    started: Optional[float] = None
    ended: Optional[float] = None


class Run(SQLModel, table=True):
    """One submission of a trial to the scheduler."""

    id: Optional[int] = Field(default=None, primary_key=True)
    trial_id: int = Field(index=True, foreign_key="trial.id")
    run_id: int
    job_id: str = ""
    state: str = "SUBMITTING"
    reason: str = ""
    submitted: float
    ended: Optional[float] = None
    exit_code: Optional[int] = None
    preempt_acked: bool = False
    outcome: str = ""
    event_offset: int = 0
    event_seq: int = 0
    searcher_seq: int = 0  # the last event of this run fed to the searcher
    first_op: int = 0  # index into the trial's ops of this run's first operation
    ops_decided: int = 0  # this run's completed operations the searcher has decided on
    # When its first node started (the run tree's nodes/ files), and the scheduler's own
    # account of it where the backend keeps one (``usage_by``: "sacct", "qstat"): its
    # elapsed seconds and the GPUs and CPUs it held (hpcdet.views.usage).
    started: Optional[float] = None
    used_seconds: Optional[float] = None
    used_gpus: Optional[int] = None
    used_cpus: Optional[int] = None
    # A server default: rows inserted naming only some columns (the benches' seeds) still go in.
    usage_by: str = Field(default="", sa_column_kwargs={"server_default": ""})


class Metric(SQLModel, table=True):
    # One report per (trial, group, step), or a chunk of ``reports`` reports of new steps and
    # the same metrics that a trial wrote as one or more lines of one flush each: its steps in
    # ``steps_json``, its metrics as columns, ``{"loss": [0.5, 0.4, ...], ...}``, in
    # ``metrics_json`` (the daemon stores a row a sweep, 1 to 30 s apart, rather than hundreds).
    # ``ordinal`` numbers a trial's reports of a group in order (a chunk's, its first), so a
    # curve of thousands of reports can be thinned to every k-th by the index. The store's
    # readers give a chunk's reports one by one, from the columns' text: a chunk's strings
    # hold none of ``,[]{}`` (``ingest.chunk_metrics``).
    __table_args__ = (
        Index("ix_metric_step", "trial_id", "group", "last_step"),
        Index("ix_metric_ordinal", "trial_id", "group", "ordinal"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    trial_id: int = Field(foreign_key="trial.id")
    run_id: int
    seq: int
    group: str
    steps_completed: int  # a chunk's lowest step
    last_step: int  # its highest
    ordinal: int = 0
    reports: int = 1
    metrics_json: str
    steps_json: str = ""  # a chunk's steps, in order
    times_json: str = ""  # [[reports, time], ...] of a chunk of several lines' reports
    batch_metrics_json: str = ""  # report_training_metrics(batch_metrics=...), if given
    reported: float


class Report(NamedTuple):
    """One metric report as the store's readers give it (each of a chunk's on its own)."""

    trial_id: int
    run_id: int
    seq: int
    group: str
    steps_completed: int
    ordinal: int
    metrics_json: str
    batch_metrics_json: str
    reported: float

    @property
    def metrics(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.metrics_json)
        return value

    @property
    def batch_metrics(self) -> Optional[list[dict[str, Any]]]:
        """What report_training_metrics(batch_metrics=...) gave, if it did."""
        if not self.batch_metrics_json:
            return None
        value: list[dict[str, Any]] = json.loads(self.batch_metrics_json)
        return value


class Checkpoint(SQLModel, table=True):
    uuid: str = Field(primary_key=True)
    trial_id: int = Field(index=True, foreign_key="trial.id")
    experiment_id: int = Field(index=True)
    run_id: int
    steps_completed: int
    metadata_json: str = "{}"
    resources_json: str = "{}"
    state: str = "COMPLETED"
    reported: float


class SearcherEvent(SQLModel, table=True):
    """The searcher's inputs in order; replaying them rebuilds the searcher exactly."""

    id: Optional[int] = Field(default=None, primary_key=True)
    experiment_id: int = Field(index=True, foreign_key="experiment.id")
    event_json: str


class ArrayJob(SQLModel, table=True):
    """The ``index``-th job array of an experiment: task k runs search request ``offset + k``.

    ``job_id`` is empty from just before sbatch until its answer is journaled; a daemon killed
    in between finds the array in the scheduler's queue on start, or submits it again.
    """

    id: Optional[int] = Field(default=None, primary_key=True)
    experiment_id: int = Field(index=True, foreign_key="experiment.id")
    index: int
    job_id: str = Field(default="", index=True)
    offset: int
    count: int
    throttle: int
    submitted: float


class Model(SQLModel, table=True):
    """A model of the registry (``hpcdet model create``)."""

    name: str = Field(primary_key=True)
    description: str = ""
    metadata_json: str = "{}"
    created: float


class ModelVersion(SQLModel, table=True):
    """A checkpoint registered as a model's ``version``-th (1, 2, ...); checkpoint GC keeps
    it."""

    __table_args__ = (Index("ix_modelversion_version", "model", "version", unique=True),)

    id: Optional[int] = Field(default=None, primary_key=True)
    model: str = Field(foreign_key="model.name")
    version: int
    uuid: str = Field(index=True)
    experiment_id: int
    trial_id: int
    steps_completed: int
    storage: str
    registered: float


class RegistryJournal(SQLModel, table=True):
    """How far the registry's journal has been applied (one row)."""

    id: int = Field(default=1, primary_key=True)
    journal_offset: int = 0
