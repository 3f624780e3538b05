"""The journal's entries applied to the database: each kind of decision as row changes.

Each applier runs inside the session that also records how far the journal has been applied
(``Store.apply_journal``), and is idempotent: a daemon killed between writing an entry and
applying it applies it again on start, and a lost database is rebuilt from every journal.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from sqlmodel import Session, select

from hpcdet.states import (
    FINAL_EXPERIMENT_STATES,
    FINAL_TRIAL_STATES,
    IDLE_TRIAL_STATES,
    LIVE_RUN_STATES,
    CheckpointState,
    ExperimentState,
    RunState,
    TrialState,
    idle_trials_follow,
)
from hpcdet.store.models import ArrayJob, Checkpoint, Experiment, Run, SearcherEvent, Trial


def _experiment_created(s: Session, e: dict[str, Any]) -> None:
    if s.get(Experiment, e["exp_id"]) is None:
        s.add(
            Experiment(
                id=e["exp_id"], name=e["name"], config_json=json.dumps(e["config"]),
                description=e.get("description") or "", resource_pool=e.get("resource_pool", ""),
                labels_json=json.dumps(e.get("labels", [])),
                priority=e.get("priority"), weight=e.get("weight", 1.0),
                position=float(e["exp_id"]), backend=e["backend"], searcher=e["searcher"],
                created=e["time"],
            )
        )


def _experiment_state(s: Session, e: dict[str, Any]) -> None:
    exp = s.get(Experiment, e["exp_id"])
    if exp is not None:
        exp.state = e["state"]
        if "error" in e:
            exp.error = e["error"]
        # continued: a finished experiment running again has not ended
        exp.ended = e["time"] if e["state"] in FINAL_EXPERIMENT_STATES else None
        s.add(exp)
    follow = idle_trials_follow(e["state"]) if e.get("cascade") else None
    if follow is not None:
        before, after = follow
        for trial in _trials(s, e["exp_id"]):
            if trial.state in before:
                _set_trial_state(s, trial, e, after, trial.restarts, e.get("reason", ""))


def _experiment_failed(s: Session, e: dict[str, Any]) -> None:
    """The experiment ends now, with the reason: stopping a failed experiment failed too (and,
    in journals written before failures went through STOPPING_ERROR, any failure)."""
    exp = s.get(Experiment, e["exp_id"])
    if exp is None:
        return
    exp.state, exp.error, exp.ended = ExperimentState.ERROR, e["message"], e["time"]
    s.add(exp)
    for trial in _trials(s, e["exp_id"]):
        for run in s.exec(select(Run).where(Run.trial_id == trial.id)):
            if run.state in LIVE_RUN_STATES:
                run.state, run.outcome, run.ended = (
                    RunState.CANCELED, "the experiment failed", e["time"])
                s.add(run)
        if trial.state not in FINAL_TRIAL_STATES:
            _set_trial_state(s, trial, e, TrialState.CANCELED, trial.restarts,
                             f"the experiment failed: {e['message']}")


def _trials(s: Session, exp_id: int) -> list[Trial]:
    return list(s.exec(select(Trial).where(Trial.experiment_id == exp_id)))


def _action_done(s: Session, e: dict[str, Any]) -> None:
    if "action_index" in e:
        exp = s.get(Experiment, e["exp_id"])
        if exp is not None:
            exp.actions_done = max(exp.actions_done, e["action_index"] + 1)
            s.add(exp)


def _experiment_queue(s: Session, e: dict[str, Any]) -> None:
    exp = s.get(Experiment, e["exp_id"])
    if exp is not None:
        apply_queue_update(exp, e)
        s.add(exp)


def apply_queue_update(exp: Experiment, e: dict[str, Any]) -> None:
    """`hpcdet job update`: priority, weight, queue position or resource pool."""
    config = json.loads(exp.config_json)
    resources = config.setdefault("resources", {})
    for key in ("priority", "weight", "resource_pool"):
        if key in e:
            setattr(exp, key, e[key])
            resources[key] = e[key]
    if "resource_pool" in e:
        # The pool names the partition from now on; slurm.partition would override it.
        for section in ("slurm", "pbs"):
            if isinstance(config.get(section), dict):
                config[section].pop("partition", None)
                config[section].pop("queue", None)
    if "position" in e:
        exp.position = e["position"]
    exp.config_json = json.dumps(config)


def _experiment_error(s: Session, e: dict[str, Any]) -> None:
    exp = s.get(Experiment, e["exp_id"])
    if exp is not None:
        exp.error = e["message"]
        s.add(exp)


def _experiment_meta(s: Session, e: dict[str, Any]) -> None:
    """What describes an experiment, not how it runs: name, description, labels, archived."""
    exp = s.get(Experiment, e["exp_id"])
    if exp is None:
        return
    if "name" in e:
        exp.name = e["name"]
    if "description" in e:
        exp.description = e["description"]
    if "labels" in e:
        exp.labels_json = json.dumps(e["labels"])
    if "archived" in e:
        exp.archived = bool(e["archived"])
    s.add(exp)


def _experiment_config(s: Session, e: dict[str, Any]) -> None:
    exp = s.get(Experiment, e["exp_id"])
    if exp is not None:
        exp.config_json = json.dumps(e["config"])
        s.add(exp)


def _trial_continued(s: Session, e: dict[str, Any]) -> None:
    trial = s.get(Trial, e["trial_id"])
    if trial is not None:
        trial.state, trial.restarts, trial.ended, trial.end_reason = TrialState.QUEUED, 0, None, ""
        trial.closed = trial.stop_requested = False
        s.add(trial)


def _trial_created(s: Session, e: dict[str, Any]) -> None:
    if s.get(Trial, e["trial_id"]) is None:
        s.add(
            Trial(
                id=e["trial_id"], experiment_id=e["exp_id"], state=TrialState.QUEUED,
                hparams_json=json.dumps(e["hparams"]), trial_seed=e["trial_seed"],
                request_id=e.get("request_id", 0),
            )
        )
    _action_done(s, e)


def _trial_of_request(s: Session, exp_id: int, request_id: int) -> Trial | None:
    q = select(Trial).where(Trial.experiment_id == exp_id, Trial.request_id == request_id)
    trial: Trial | None = s.exec(q).first()
    return trial


def _op_issued(s: Session, e: dict[str, Any]) -> None:
    trial = _trial_of_request(s, e["exp_id"], e["request_id"])
    if trial is not None:
        ops = json.loads(trial.ops_json)
        if len(ops) == e["op_index"]:
            trial.ops_json = json.dumps([*ops, e["length"]])
        if trial.state == TrialState.WAITING:
            trial.state = TrialState.QUEUED  # promoted: resubmit from its latest checkpoint
        s.add(trial)
    _action_done(s, e)


def _trial_closed(s: Session, e: dict[str, Any]) -> None:
    trial = _trial_of_request(s, e["exp_id"], e["request_id"])
    if trial is not None:
        trial.closed = True
        if trial.state == TrialState.WAITING:
            trial.state, trial.ended = TrialState.COMPLETED, e["time"]
        s.add(trial)
    _action_done(s, e)


def _trial_stop(s: Session, e: dict[str, Any]) -> None:
    trial = _trial_of_request(s, e["exp_id"], e["request_id"])
    if trial is not None:
        trial.stop_requested = True
        if trial.state in IDLE_TRIAL_STATES:
            trial.state, trial.ended = TrialState.COMPLETED, e["time"]
            trial.end_reason = "stopped by the searcher before it ran"
        s.add(trial)
    _action_done(s, e)


def _searcher_shutdown(s: Session, e: dict[str, Any]) -> None:
    exp = s.get(Experiment, e["exp_id"])
    if exp is not None:
        exp.searcher_done = True
        exp.error = e.get("message", "") if e.get("failure") else ""
        s.add(exp)
    _action_done(s, e)


def _searcher_event(s: Session, e: dict[str, Any]) -> None:
    s.add(SearcherEvent(experiment_id=e["exp_id"], event_json=json.dumps(e["event"])))
    exp = s.get(Experiment, e["exp_id"])
    if exp is not None and "progress" in e:
        exp.progress = e["progress"]
        s.add(exp)
    if "exited_trial_id" in e:
        exited = s.get(Trial, e["exited_trial_id"])
        if exited is not None:
            exited.exit_reported = True
            s.add(exited)
    if "trial_id" not in e:
        return
    run = _find_run(s, e["trial_id"], e["run_id"])
    if run is not None:
        run.searcher_seq = max(run.searcher_seq, e["seq"])
        if e["event"]["kind"] == "op_completed":
            run.ops_decided += 1
        s.add(run)
    trial = s.get(Trial, e["trial_id"])
    if trial is not None and e["event"]["kind"] == "op_completed":
        trial.ops_completed += 1
        s.add(trial)


def _trial_state(s: Session, e: dict[str, Any]) -> None:
    trial = s.get(Trial, e["trial_id"])
    if trial is not None:
        _set_trial_state(s, trial, e, e["state"], e.get("restarts", trial.restarts),
                         e.get("reason", ""))


def _set_trial_state(
    s: Session, trial: Trial, e: dict[str, Any], state: str, restarts: int, reason: str
) -> None:
    trial.state, trial.restarts, trial.end_reason = state, restarts, reason
    if state in FINAL_TRIAL_STATES:
        trial.ended = e["time"]
    s.add(trial)


def _find_run(s: Session, trial_id: int, run_id: int) -> Run | None:
    q = select(Run).where(Run.trial_id == trial_id, Run.run_id == run_id)
    run: Run | None = s.exec(q).first()
    return run


def _run_submitting(s: Session, e: dict[str, Any]) -> None:
    if _find_run(s, e["trial_id"], e["run_id"]) is None:
        s.add(Run(trial_id=e["trial_id"], run_id=e["run_id"], submitted=e["time"],
                  first_op=e.get("first_op", 0)))
    trial = s.get(Trial, e["trial_id"])
    if trial is not None:
        trial.run_id = e["run_id"]
        trial.state = TrialState.ACTIVE
        trial.started = trial.started or e["time"]
        s.add(trial)


def _run_submitted(s: Session, e: dict[str, Any]) -> None:
    run = _find_run(s, e["trial_id"], e["run_id"])
    if run is not None and run.state == RunState.SUBMITTING:
        run.job_id = e["job_id"]
        run.state = RunState.PENDING
        s.add(run)


def _run_ended(s: Session, e: dict[str, Any]) -> None:
    """A run's end and, in the same entry, what its trial does next (older journals carry
    the trial's part in a separate ``trial_state`` entry that follows)."""
    run = _find_run(s, e["trial_id"], e["run_id"])
    if run is not None:
        run.state = e["job_state"]
        run.exit_code = e.get("exit_code")
        run.outcome = e.get("outcome", "")
        run.ended = e["time"]
        s.add(run)
    trial = s.get(Trial, e["trial_id"])
    if trial is not None and "trial_state" in e:
        _set_trial_state(s, trial, e, e["trial_state"], e["restarts"], e.get("reason", ""))


def _checkpoint_deleted(s: Session, e: dict[str, Any]) -> None:
    ckpt = s.get(Checkpoint, e["uuid"])
    if ckpt is None:
        # A rebuilt database replays the journal before it re-reads the event logs: leave a
        # tombstone that the later ingest of the checkpoint fills in but keeps deleted.
        ckpt = Checkpoint(uuid=e["uuid"], trial_id=e["trial_id"], experiment_id=e["exp_id"],
                          run_id=0, steps_completed=0, reported=e["time"])
    ckpt.state = CheckpointState.DELETED
    s.add(ckpt)
    trial = s.get(Trial, e["trial_id"])
    if trial is not None and trial.latest_checkpoint == e["uuid"]:
        trial.latest_checkpoint = None
        s.add(trial)


def _arrays(s: Session, exp_id: int) -> list[ArrayJob]:
    return list(s.exec(select(ArrayJob).where(ArrayJob.experiment_id == exp_id)))


def _array_submitting(s: Session, e: dict[str, Any]) -> None:
    if not any(a.index == e["index"] for a in _arrays(s, e["exp_id"])):
        s.add(ArrayJob(experiment_id=e["exp_id"], index=e["index"], offset=e["offset"],
                       count=e["count"], throttle=e["throttle"], submitted=e["time"]))


def _array_submitted(s: Session, e: dict[str, Any]) -> None:
    arrays = _arrays(s, e["exp_id"])
    if any(a.job_id == e["job_id"] for a in arrays):
        return
    # Journals written before "array_submitting" existed carry no index: arrays were numbered
    # in submission order.
    index = e.get("index", len(arrays))
    row = next((a for a in arrays if a.index == index), None)
    if row is None:
        row = ArrayJob(experiment_id=e["exp_id"], index=index, offset=e["offset"],
                       count=e["count"], throttle=e["throttle"], submitted=e["time"])
    row.job_id = e["job_id"]
    s.add(row)


def _array_abandoned(s: Session, e: dict[str, Any]) -> None:
    for row in _arrays(s, e["exp_id"]):
        if row.index == e["index"] and not row.job_id:
            s.delete(row)


APPLIERS: dict[str, Callable[[Session, dict[str, Any]], None]] = {
    "array_abandoned": _array_abandoned,
    "array_submitting": _array_submitting,
    "array_submitted": _array_submitted,
    "checkpoint_deleted": _checkpoint_deleted,
    "experiment_config": _experiment_config,
    "experiment_meta": _experiment_meta,
    "experiment_error": _experiment_error,
    "experiment_failed": _experiment_failed,
    "experiment_queue": _experiment_queue,
    "experiment_priority": _experiment_queue,  # written by hpcdet before the queue updates
    "trial_continued": _trial_continued,
    "experiment_created": _experiment_created,
    "experiment_state": _experiment_state,
    "trial_created": _trial_created,
    "trial_state": _trial_state,
    "run_submitting": _run_submitting,
    "run_submitted": _run_submitted,
    "run_ended": _run_ended,
    "searcher_event": _searcher_event,
    "op_issued": _op_issued,
    "trial_closed": _trial_closed,
    "trial_stop": _trial_stop,
    "searcher_shutdown": _searcher_shutdown,
}


class UnappliableEntry(Exception):
    """A journal entry whose fields its kind's applier cannot use (a damaged line)."""

    def __init__(self, start: int, error: Exception) -> None:
        super().__init__(start, error)
        self.start, self.error = start, error
