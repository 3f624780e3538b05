"""SQLite tables: the daemon's index of the run tree.

Annotations use ``Optional`` because SQLModel evaluates them at runtime and hpcdet supports
Python 3.9, where ``int | None`` cannot be evaluated.
"""

from typing import Optional

from sqlmodel import Field, SQLModel


class Experiment(SQLModel, table=True):
    id: int = Field(primary_key=True)
    name: str
    state: str = "ACTIVE"
    config_json: str
    description: str = ""
    resource_pool: str = ""
    priority: Optional[int] = None
    backend: str = "local"
    searcher: str = "single"
    created: float
    ended: Optional[float] = None
    journal_offset: int = 0


class Trial(SQLModel, table=True):
    id: int = Field(primary_key=True)
    experiment_id: int = Field(index=True, foreign_key="experiment.id")
    state: str = "ACTIVE"
    hparams_json: str = "{}"
    trial_seed: int = 0
    restarts: int = 0
    run_id: int = 0
    latest_checkpoint: Optional[str] = None
    steps_completed: int = 0
    progress: float = 0.0
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


class Metric(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    trial_id: int = Field(index=True, foreign_key="trial.id")
    run_id: int
    seq: int
    group: str
    steps_completed: int
    metrics_json: str
    reported: float


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
