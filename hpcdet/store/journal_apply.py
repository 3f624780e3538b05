"""The journal's entries applied to the database: each kind of decision as row changes.

Each applier runs inside the session that also records how far the journal has been applied
(``Store.apply_journal``), and is idempotent: a daemon killed between writing an entry and
applying it applies it again on start, and a lost database is rebuilt from every journal. The
states an entry moves besides the one it names follow the rules of ``hpcdet.states``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from sqlmodel import Session, select

from hpcdet import states
from hpcdet.states import CheckpointState, ExperimentState, TrialState
from hpcdet.store import entries as en
from hpcdet.store.models import (
    ArrayJob,
    Checkpoint,
    Experiment,
    Model,
    ModelVersion,
    Run,
    SearcherEvent,
    Trial,
)


@dataclass(frozen=True)
class Stamp:
    """Where and when an entry was journaled: its experiment and its time."""

    exp_id: int
    time: float


def _experiment_created(s: Session, e: en.ExperimentCreated, at: Stamp) -> None:
    if s.get(Experiment, at.exp_id) is None:
        s.add(
            Experiment(
                id=at.exp_id, name=e.name, config_json=json.dumps(e.config),
                description=e.description or "", resource_pool=e.resource_pool,
                labels_json=json.dumps(e.labels), priority=e.priority, weight=e.weight,
                position=float(at.exp_id), backend=e.backend, searcher=e.searcher,
                created=at.time, request_id=e.request_id or "", task=e.task,
            )
        )


def _experiment_state(s: Session, e: en.ExperimentStateChanged, at: Stamp) -> None:
    exp = s.get(Experiment, at.exp_id)
    if exp is not None:
        exp.state = e.state
        if e.error is not None:
            exp.error = e.error
        exp.ended = at.time if states.ends(e.state) else None
        s.add(exp)
    follow = states.idle_trials_follow(e.state) if e.cascade else None
    if follow is not None:
        before, after = follow
        for trial in _trials(s, at.exp_id):
            if trial.state in before:
                _set_trial_state(s, trial, at, after, trial.restarts, e.reason or "")


def _experiment_failed(s: Session, e: en.ExperimentFailed, at: Stamp) -> None:
    """The experiment ends now, with the reason: stopping a failed experiment failed too (and,
    in journals written before failures went through STOPPING_ERROR, any failure)."""
    exp = s.get(Experiment, at.exp_id)
    if exp is None:
        return
    exp.state, exp.error, exp.ended = ExperimentState.ERROR, e.message, at.time
    s.add(exp)
    for trial in _trials(s, at.exp_id):
        for run in s.exec(select(Run).where(Run.trial_id == trial.id)):
            canceled = states.canceled_by_failure(run.state)
            if canceled is not None:
                run.state, run.outcome, run.ended = canceled, "the experiment failed", at.time
                s.add(run)
        after = states.trial_canceled_by_failure(trial.state)
        if after is not None:
            _set_trial_state(s, trial, at, after, trial.restarts,
                             f"the experiment failed: {e.message}")


def _trials(s: Session, exp_id: int) -> list[Trial]:
    return list(s.exec(select(Trial).where(Trial.experiment_id == exp_id)))


def _action_done(s: Session, action_index: int | None, at: Stamp) -> None:
    if action_index is not None:
        exp = s.get(Experiment, at.exp_id)
        if exp is not None:
            exp.actions_done = max(exp.actions_done, action_index + 1)
            s.add(exp)


def _experiment_queue(s: Session, e: en.ExperimentQueueUpdated, at: Stamp) -> None:
    exp = s.get(Experiment, at.exp_id)
    if exp is not None:
        apply_queue_update(exp, e)
        s.add(exp)


def apply_queue_update(exp: Experiment, e: en.ExperimentQueueUpdated) -> None:
    """`hpcdet job update`: priority, weight, queue position or resource pool."""
    config = json.loads(exp.config_json)
    resources = config.setdefault("resources", {})
    given = {"priority": e.priority, "weight": e.weight, "resource_pool": e.resource_pool}
    for key, value in given.items():
        if value is not None:
            setattr(exp, key, value)
            resources[key] = value
    if e.resource_pool is not None:
        # The pool names the partition from now on; slurm.partition would override it.
        for section in ("slurm", "pbs"):
            if isinstance(config.get(section), dict):
                config[section].pop("partition", None)
                config[section].pop("queue", None)
    if e.position is not None:
        exp.position = e.position
    exp.config_json = json.dumps(config)


def _experiment_error(s: Session, e: en.ExperimentErrorSet, at: Stamp) -> None:
    exp = s.get(Experiment, at.exp_id)
    if exp is not None:
        exp.error = e.message
        s.add(exp)


def _experiment_advised(s: Session, e: en.ExperimentAdvised, at: Stamp) -> None:
    exp = s.get(Experiment, at.exp_id)
    if exp is not None:
        exp.advice = e.advice
        s.add(exp)


def _experiment_meta(s: Session, e: en.ExperimentMetaChanged, at: Stamp) -> None:
    exp = s.get(Experiment, at.exp_id)
    if exp is None:
        return
    if e.name is not None:
        exp.name = e.name
    if e.description is not None:
        exp.description = e.description
    if e.labels is not None:
        exp.labels_json = json.dumps(e.labels)
    if e.archived is not None:
        exp.archived = e.archived
    s.add(exp)


def _experiment_config(s: Session, e: en.ExperimentConfigChanged, at: Stamp) -> None:
    exp = s.get(Experiment, at.exp_id)
    if exp is not None:
        exp.config_json = json.dumps(e.config)
        s.add(exp)


def _trial_continued(s: Session, e: en.TrialContinued, at: Stamp) -> None:
    trial = s.get(Trial, e.trial_id)
    if trial is not None:
        trial.state, trial.restarts, trial.ended, trial.end_reason = TrialState.QUEUED, 0, None, ""
        trial.closed = trial.stop_requested = False
        s.add(trial)


def _trial_created(s: Session, e: en.TrialCreated, at: Stamp) -> None:
    if s.get(Trial, e.trial_id) is None:
        s.add(
            Trial(
                id=e.trial_id, experiment_id=at.exp_id, state=TrialState.QUEUED,
                hparams_json=json.dumps(e.hparams), trial_seed=e.trial_seed,
                request_id=e.request_id,
            )
        )
    _action_done(s, e.action_index, at)


def _trial_of_request(s: Session, exp_id: int, request_id: int) -> Trial | None:
    q = select(Trial).where(Trial.experiment_id == exp_id, Trial.request_id == request_id)
    trial: Trial | None = s.exec(q).first()
    return trial


def _op_issued(s: Session, e: en.OpIssued, at: Stamp) -> None:
    trial = _trial_of_request(s, at.exp_id, e.request_id)
    if trial is not None:
        ops = json.loads(trial.ops_json)
        if len(ops) == e.op_index:
            trial.ops_json = json.dumps([*ops, e.length])
        trial.state = states.promoted(trial.state) or trial.state
        s.add(trial)
    _action_done(s, e.action_index, at)


def _trial_closed(s: Session, e: en.TrialClosed, at: Stamp) -> None:
    trial = _trial_of_request(s, at.exp_id, e.request_id)
    if trial is not None:
        trial.closed = True
        after = states.closed(trial.state)
        if after is not None:
            trial.state, trial.ended = after, at.time
        s.add(trial)
    _action_done(s, e.action_index, at)


def _trial_stop(s: Session, e: en.TrialStopped, at: Stamp) -> None:
    trial = _trial_of_request(s, at.exp_id, e.request_id)
    if trial is not None:
        trial.stop_requested = True
        after = states.stopped_by_searcher(trial.state)
        if after is not None:
            trial.state, trial.ended = after, at.time
            trial.end_reason = states.STOPPED_BEFORE_IT_RAN
        s.add(trial)
    _action_done(s, e.action_index, at)


def _searcher_shutdown(s: Session, e: en.SearcherShutdown, at: Stamp) -> None:
    exp = s.get(Experiment, at.exp_id)
    if exp is not None:
        exp.searcher_done = True
        exp.error = e.message if e.failure else ""
        s.add(exp)
    _action_done(s, e.action_index, at)


def _searcher_event(s: Session, e: en.SearcherEventFed, at: Stamp) -> None:
    s.add(SearcherEvent(experiment_id=at.exp_id, event_json=json.dumps(e.event)))
    exp = s.get(Experiment, at.exp_id)
    if exp is not None and e.progress is not None:
        exp.progress = e.progress
        s.add(exp)
    if e.exited_trial_id is not None:
        exited = s.get(Trial, e.exited_trial_id)
        if exited is not None:
            exited.exit_reported = True
            s.add(exited)
    if e.trial_id is None:
        return
    completed = e.event["kind"] == "op_completed"
    run = _find_run(s, e.trial_id, _given(e.run_id, "run_id"))
    if run is not None:
        run.searcher_seq = max(run.searcher_seq, _given(e.seq, "seq"))
        if completed:
            run.ops_decided += 1
        s.add(run)
    trial = s.get(Trial, e.trial_id)
    if trial is not None and completed:
        trial.ops_completed += 1
        s.add(trial)


def _given(value: int | None, name: str) -> int:
    if value is None:
        raise KeyError(name)  # a damaged entry: the trial event behind it without its run
    return value


def _trial_state(s: Session, e: en.TrialStateChanged, at: Stamp) -> None:
    trial = s.get(Trial, e.trial_id)
    if trial is not None:
        restarts = trial.restarts if e.restarts is None else e.restarts
        _set_trial_state(s, trial, at, e.state, restarts, e.reason)


def _set_trial_state(
    s: Session, trial: Trial, at: Stamp, state: str, restarts: int, reason: str
) -> None:
    trial.state, trial.restarts, trial.end_reason = state, restarts, reason
    if states.ends(state):
        trial.ended = at.time
    s.add(trial)


def _find_run(s: Session, trial_id: int, run_id: int) -> Run | None:
    q = select(Run).where(Run.trial_id == trial_id, Run.run_id == run_id)
    run: Run | None = s.exec(q).first()
    return run


def _run_submitting(s: Session, e: en.RunSubmitting, at: Stamp) -> None:
    if _find_run(s, e.trial_id, e.run_id) is None:
        s.add(Run(trial_id=e.trial_id, run_id=e.run_id, submitted=at.time,
                  first_op=e.first_op))
    trial = s.get(Trial, e.trial_id)
    if trial is not None:
        trial.run_id = e.run_id
        trial.state = TrialState.ACTIVE
        trial.started = trial.started or at.time
        s.add(trial)


def _run_submitted(s: Session, e: en.RunSubmitted, at: Stamp) -> None:
    run = _find_run(s, e.trial_id, e.run_id)
    after = states.job_named(run.state) if run is not None else None
    if run is not None and after is not None:
        run.job_id = e.job_id
        run.state = after
        s.add(run)


def _run_ended(s: Session, e: en.RunEnded, at: Stamp) -> None:
    """A run's end and, in the same entry, what its trial does next."""
    run = _find_run(s, e.trial_id, e.run_id)
    if run is not None:
        run.state = e.job_state
        run.exit_code = e.exit_code
        run.outcome = e.outcome
        run.ended = at.time
        run.started, run.used_seconds = e.started, e.used_seconds
        run.used_gpus, run.used_cpus, run.usage_by = e.used_gpus, e.used_cpus, e.usage_by
        s.add(run)
    trial = s.get(Trial, e.trial_id)
    if trial is not None and e.trial_state is not None:
        _set_trial_state(s, trial, at, e.trial_state, _given(e.restarts, "restarts"), e.reason)


def _checkpoint_deleted(s: Session, e: en.CheckpointDeleted, at: Stamp) -> None:
    ckpt = s.get(Checkpoint, e.uuid)
    if ckpt is None:
        # A rebuilt database replays the journal before it re-reads the event logs: leave a
        # tombstone that the later ingest of the checkpoint fills in but keeps deleted.
        ckpt = Checkpoint(uuid=e.uuid, trial_id=e.trial_id, experiment_id=at.exp_id,
                          run_id=0, steps_completed=0, reported=at.time)
    ckpt.state = CheckpointState.DELETED
    s.add(ckpt)
    trial = s.get(Trial, e.trial_id)
    if trial is not None and trial.latest_checkpoint == e.uuid:
        trial.latest_checkpoint = None
        s.add(trial)


def _arrays(s: Session, exp_id: int) -> list[ArrayJob]:
    return list(s.exec(select(ArrayJob).where(ArrayJob.experiment_id == exp_id)))


def _array_submitting(s: Session, e: en.ArraySubmitting, at: Stamp) -> None:
    if not any(a.index == e.index for a in _arrays(s, at.exp_id)):
        s.add(ArrayJob(experiment_id=at.exp_id, index=e.index, offset=e.offset,
                       count=e.count, throttle=e.throttle, submitted=at.time))


def _array_submitted(s: Session, e: en.ArraySubmitted, at: Stamp) -> None:
    arrays = _arrays(s, at.exp_id)
    if any(a.job_id == e.job_id for a in arrays):
        return
    # Journals written before "array_submitting" existed carry no index: arrays were numbered
    # in submission order.
    index = len(arrays) if e.index is None else e.index
    row = next((a for a in arrays if a.index == index), None)
    if row is None:
        row = ArrayJob(experiment_id=at.exp_id, index=index, offset=e.offset,
                       count=e.count, throttle=e.throttle, submitted=at.time)
    row.job_id = e.job_id
    s.add(row)


def _array_abandoned(s: Session, e: en.ArrayAbandoned, at: Stamp) -> None:
    for row in _arrays(s, at.exp_id):
        if row.index == e.index and not row.job_id:
            s.delete(row)


def _model_created(s: Session, e: en.ModelCreated, at: Stamp) -> None:
    if s.get(Model, e.name) is None:
        s.add(Model(name=e.name, description=e.description,
                    metadata_json=json.dumps(e.metadata), created=at.time))


def _model_version(s: Session, e: en.ModelVersionRegistered, at: Stamp) -> None:
    taken = s.exec(select(ModelVersion).where(ModelVersion.model == e.model,
                                              ModelVersion.version == e.version)).first()
    if taken is None:
        s.add(ModelVersion(model=e.model, version=e.version, uuid=e.uuid,
                           experiment_id=e.experiment_id, trial_id=e.trial_id,
                           steps_completed=e.steps_completed, storage=e.storage,
                           registered=at.time))


# Each class of entry with its applier (typed by its class: ``apply`` looks it up by the
# entry's class, so an applier only ever gets its own).
APPLIERS: dict[type[en.Entry], Callable[[Session, Any, Stamp], None]] = {
    en.ArrayAbandoned: _array_abandoned,
    en.ArraySubmitting: _array_submitting,
    en.ArraySubmitted: _array_submitted,
    en.CheckpointDeleted: _checkpoint_deleted,
    en.ExperimentConfigChanged: _experiment_config,
    en.ExperimentMetaChanged: _experiment_meta,
    en.ExperimentErrorSet: _experiment_error,
    en.ExperimentAdvised: _experiment_advised,
    en.ExperimentFailed: _experiment_failed,
    en.ExperimentQueueUpdated: _experiment_queue,
    en.TrialContinued: _trial_continued,
    en.ExperimentCreated: _experiment_created,
    en.ExperimentStateChanged: _experiment_state,
    en.TrialCreated: _trial_created,
    en.TrialStateChanged: _trial_state,
    en.RunSubmitting: _run_submitting,
    en.RunSubmitted: _run_submitted,
    en.RunEnded: _run_ended,
    en.SearcherEventFed: _searcher_event,
    en.OpIssued: _op_issued,
    en.TrialClosed: _trial_closed,
    en.TrialStopped: _trial_stop,
    en.SearcherShutdown: _searcher_shutdown,
    en.ModelCreated: _model_created,
    en.ModelVersionRegistered: _model_version,
}


def apply(s: Session, entry: en.Entry, at: Stamp) -> None:
    APPLIERS[type(entry)](s, entry, at)


def read_line(cls: type[en.Entry], line: dict[str, Any]) -> tuple[en.Entry, Stamp]:
    """A journal line of a known kind as its entry and stamp; raises KeyError, TypeError or
    ValueError for a damaged one."""
    exp_id, time = line["exp_id"], line["time"]
    if not isinstance(exp_id, int) or not isinstance(time, (int, float)):
        raise TypeError(f"exp_id {exp_id!r}, time {time!r}")
    return en.decode(cls, line), Stamp(exp_id, float(time))


class UnappliableEntry(Exception):
    """A journal entry whose fields its kind's applier cannot use (a damaged line)."""

    def __init__(self, start: int, error: Exception) -> None:
        super().__init__(start, error)
        self.start, self.error = start, error
