"""What users ask the daemon to do: the requests behind `hpcdet experiment ...`."""

from __future__ import annotations

import copy
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from hpcdet.config import ExperimentConfig
from hpcdet.daemon.configs import Configs
from hpcdet.daemon.controls import Controls
from hpcdet.daemon.creation import Creation
from hpcdet.daemon.finishing import Finisher
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.queueing import Queue
from hpcdet.daemon.registry import Registry
from hpcdet.daemon.retention import Retention
from hpcdet.daemon.submission import Submission
from hpcdet.errors import NotFoundError, StateError, UsageError
from hpcdet.ids import check_id
from hpcdet.notify import Notifier
from hpcdet.paths import StatePaths, hostname
from hpcdet.private import private_dir, sharing
from hpcdet.protocol.messages import (
    ID_FIELDS,
    Activate,
    Cancel,
    Continue,
    ContinueTrial,
    CopyDatabase,
    Create,
    Created,
    CreateModel,
    CreateWebhook,
    DeleteCheckpoint,
    DeleteExperiment,
    DeleteWebhook,
    Handlers,
    Kill,
    KillTrial,
    Pause,
    Ping,
    Pong,
    RegisterVersion,
    SetExperiment,
    Shutdown,
    UpdateJobs,
    decode,
)
from hpcdet.records import ExperimentRecord as Experiment
from hpcdet.rundir import layout
from hpcdet.states import (
    FINAL_EXPERIMENT_STATES,
    FINAL_TRIAL_STATES,
    CheckpointState,
    ExperimentState,
    TrialState,
)
from hpcdet.store.entries import (
    ExperimentConfigChanged,
    ExperimentMetaChanged,
    ExperimentStateChanged,
    TrialContinued,
    TrialStateChanged,
)
from hpcdet.store.repository import Store

# Seconds a copy of the database for readers on other hosts is handed out again.
COPY_FRESH = 2.0


class Commands:
    """The requests users make (``hpcdet.protocol.messages``), each carried out by its entry in
    the dispatch table; ``handle(op, args)`` serves one as it came over the wire."""

    def __init__(
        self, store: Store, journal: Journal, paths: StatePaths, configs: Configs,
        controls: Controls, submission: Submission, retention: Retention, queue: Queue,
        creation: Creation, finisher: Finisher, shutdown: Callable[[], None],
        notifier: Notifier | None = None,
    ) -> None:
        self.store = store
        self.journal = journal
        self.paths = paths
        self.configs = configs
        self.controls = controls
        self.submission = submission
        self.retention = retention
        self.creation = creation
        self.queue = queue
        self.finisher = finisher
        self._shutdown = shutdown
        self.registry = Registry(store, journal, configs, paths)
        self.notifier = notifier or Notifier.of(paths)
        self.handlers = self._handlers()

    def handle(self, op: object, args: object) -> object:
        """One request as it came over the wire: checked, carried out, its reply as JSON."""
        request = decode(op, args)
        for name in ID_FIELDS & {f.name for f in fields(request)}:  # type: ignore[arg-type]
            check_id(name, getattr(request, name))  # SQLite cannot even look up other ids
        return self.handlers(request)

    def _handlers(self) -> Handlers:
        """What carries out each request type (a test checks that every one has its entry)."""
        return (Handlers()
                .on(Ping, lambda _: self.ping())
                .on(Shutdown, lambda _: self.shutdown())
                .on(CopyDatabase, lambda _: self.copy_database())
                .on(Create, self.create)
                .on(Pause, lambda r: self.pause(r.exp_id))
                .on(Activate, lambda r: self.activate(r.exp_id))
                .on(Cancel, lambda r: self.cancel(r.exp_id))
                .on(Kill, lambda r: self.kill(r.exp_id))
                .on(Continue, lambda r: self.continue_(r.exp_id, r.config))
                .on(ContinueTrial, lambda r: self.continue_trial(r.trial_id))
                .on(DeleteCheckpoint, lambda r: self.delete_checkpoint(r.uuid))
                .on(SetExperiment, lambda r: self.set_experiment(r.exp_id, r.field, r.value))
                .on(DeleteExperiment, lambda r: self.delete_experiment(r.exp_id))
                .on(KillTrial, lambda r: self.kill_trial(r.trial_id))
                .on(UpdateJobs, lambda r: self.queue.update_jobs(r.updates))
                .on(CreateModel, lambda r: self.registry.create_model(
                    r.name, r.description, r.metadata or {}))
                .on(RegisterVersion, lambda r: self.registry.register_version(r.model, r.uuid))
                .on(CreateWebhook, lambda r: self.notifier.create(
                    r.url, r.triggers, r.type, r.name, r.mode))
                .on(DeleteWebhook, lambda r: self.notifier.delete(r.webhook)))

    def create(self, request: Create) -> Created:
        return Created.from_reply(self.creation.create(
            request.config, request.staging, request.request_id, request.python,
            request.paused, request.convert, request.task))

    def ping(self) -> Pong:
        return Pong(os.getpid(), hostname())

    def copy_database(self) -> str:
        """Copied again when the last copy is older than COPY_FRESH seconds: the commands
        of one reader (a web UI page's requests) share one."""
        target = self.paths.database_copy()
        try:
            fresh = time.time() - target.stat().st_mtime < COPY_FRESH
        except FileNotFoundError:
            fresh = False
        if not fresh:
            private_dir(target.parent, sharing())
            self.store.copy_to(target)
        return str(target)

    def shutdown(self) -> str:
        self._shutdown()
        return "stopping"

    def pause(self, exp_id: int) -> str:
        exp = self.store.experiment(exp_id)
        if exp.state != ExperimentState.ACTIVE:
            raise StateError(f"experiment {exp_id} is {exp.state}; only ACTIVE ones can pause")
        self.journal.record(
            exp_id, ExperimentStateChanged(state=ExperimentState.PAUSED, cascade=True))
        self.controls.stop(exp_id, self.store.trials(exp_id, state=TrialState.ACTIVE),
                           graceful=True)
        self.controls.sync_all()
        return f"Paused experiment {exp_id}"

    def activate(self, exp_id: int) -> str:
        exp = self.store.experiment(exp_id)
        if exp.state == ExperimentState.ACTIVE:
            return f"Activated experiment {exp_id}"
        if exp.state != ExperimentState.PAUSED:
            raise StateError(f"experiment {exp_id} is {exp.state}; only PAUSED ones can activate")
        self.journal.record(
            exp_id, ExperimentStateChanged(state=ExperimentState.ACTIVE, cascade=True))
        self.controls.sync_all()
        self.submission.submit_queued()
        return f"Activated experiment {exp_id}"

    def cancel(self, exp_id: int) -> str:
        """Graceful stop: running trials checkpoint and exit; nothing new starts."""
        return self._stop_experiment(exp_id, graceful=True, verb="Canceled")

    def kill(self, exp_id: int) -> str:
        """Immediate stop: running trials' jobs are canceled."""
        return self._stop_experiment(exp_id, graceful=False, verb="Killed")

    def _stop_experiment(self, exp_id: int, graceful: bool, verb: str) -> str:
        exp = self.store.experiment(exp_id)
        if exp.state in FINAL_EXPERIMENT_STATES:
            return f"{verb} experiment {exp_id}"
        self.journal.record(exp_id, ExperimentStateChanged(
            state=ExperimentState.STOPPING_CANCELED, cascade=True,
            reason=f"{verb.lower()} by the user"))
        # Before the trials' jobs go: the scheduler starts an array's next pending tasks as
        # soon as running ones end, and those must find nothing to wait for.
        self.finisher.close_arrays(exp_id, cancel=not graceful)
        self.controls.stop(exp_id, self.store.trials(exp_id, state=TrialState.ACTIVE),
                           graceful=graceful)
        self.controls.sync_all()
        return f"{verb} experiment {exp_id}"

    def continue_(self, exp_id: int, config: dict[str, Any] | None = None) -> str:
        """Determined's `experiment continue`: same experiment and trials, resumed from their
        latest checkpoints with restarts reset."""
        exp = self.store.experiment(exp_id)
        if exp.state not in FINAL_EXPERIMENT_STATES:
            raise StateError(f"experiment {exp_id} is {exp.state}; only a finished experiment "
                             "can continue (pause/activate resume a running one)")
        name = self.configs.get(exp).searcher.name
        if name not in ("single", "random", "grid"):
            raise StateError(f"Unsupported searcher type provided: '{name}'; only single, "
                             "random and grid experiments can continue")
        if config is not None and name != "single":
            raise StateError("config overrides are only allowed when continuing an experiment "
                             "with the single searcher")
        trials = self.store.trials(exp_id)
        again = trials if name == "single" else [
            t for t in trials if t.state != TrialState.COMPLETED]
        if not again:
            raise StateError("experiment has been completed, cannot continue this experiment")
        if config is not None:
            cfg = ExperimentConfig.from_dict(config)
            self.journal.record(exp_id, ExperimentConfigChanged(config=cfg.to_dict()))
            self.configs.forget(exp_id)
        for trial in again:
            self.journal.record(exp_id, TrialContinued(trial_id=trial.id))
        self.journal.record(exp_id, ExperimentStateChanged(state=ExperimentState.ACTIVE))
        # Its old arrays were canceled when it ended; a new one must not find them closed.
        layout.array_closed(self.paths.experiment(exp_id)).unlink(missing_ok=True)
        self.submission.submit_queued()
        return f"Continued experiment {exp_id}"

    def continue_trial(self, trial_id: int) -> Created:
        """The WebUI's Continue Trial: a new single-trial experiment warm-started from the
        trial's latest checkpoint, with its hyperparameters fixed."""
        trial = self.store.trial(trial_id)
        exp = self.store.experiment(trial.experiment_id)
        raw = self.configs.get(exp).to_dict()
        searcher = raw["searcher"]
        raw["searcher"] = {
            "name": "single", "metric": searcher["metric"],
            "smaller_is_better": searcher.get("smaller_is_better", True),
            "source_trial_id": trial.id, "source_checkpoint_uuid": trial.latest_checkpoint,
            **({"max_length": searcher["max_length"]} if searcher.get("max_length") else {}),
        }
        raw["hyperparameters"] = copy.deepcopy(trial.hparams)
        staging = self.paths.requests / f"continue-{trial_id}-{time.time():.0f}.context"
        try:
            shutil.copytree(self.paths.context(exp.id), staging)
            return Created.from_reply(self.creation.create(raw, str(staging)))
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def set_experiment(self, exp_id: int, field: str, value: Any) -> str:
        """What describes the experiment (name, description, labels, archived), and the
        settings that may change while it runs (max_slots, gc_policy)."""
        exp = self.store.experiment(exp_id)
        labels = list(exp.labels)
        if field == "name":
            if not isinstance(value, str) or not value.strip():
                raise UsageError("an experiment's name cannot be empty")
            entry: dict[str, Any] = {"name": value}
            said = f"Set name of experiment {exp_id} to '{value}'"
        elif field == "description":
            entry = {"description": str(value)}
            said = f"Set description of experiment {exp_id} to '{value}'"
        elif field == "labels_add":
            entry = {"labels": labels + [str(value)] if str(value) not in labels else labels}
            said = f"Added label '{value}' to experiment {exp_id}"
        elif field == "labels_remove":
            entry = {"labels": [label for label in labels if label != str(value)]}
            said = f"Removed label '{value}' from experiment {exp_id}"
        elif field == "max_slots":
            return self._set_max_slots(exp, value)
        elif field == "gc_policy":
            return self._set_gc_policy(exp, value)
        elif field == "archived":
            if value and exp.state not in FINAL_EXPERIMENT_STATES:
                raise StateError(f"experiment {exp_id} is {exp.state}; only a finished "
                                 "experiment can be archived (kill or cancel it first)")
            entry = {"archived": bool(value)}
            said = f"{'Archived' if value else 'Unarchived'} experiment {exp_id}"
        else:
            raise UsageError(f"an experiment has no setting {field!r}")
        self.journal.record(exp_id, ExperimentMetaChanged(**entry))
        return said

    def _set_max_slots(self, exp: Experiment, value: Any) -> str:
        """A new cap for the trials it submits from now on; arrays already submitted keep
        their throttle."""
        if exp.state in FINAL_EXPERIMENT_STATES:
            raise StateError(f"experiment {exp.id} is {exp.state}; max_slots only changes what "
                             "an unfinished experiment submits")
        self._reconfigure(exp, "resources", {"max_slots": value})
        self.submission.submit_queued()
        return f"Set `max_slots` of experiment {exp.id} to {value}"

    def _set_gc_policy(self, exp: Experiment, value: Any) -> str:
        """New save_* numbers for its checkpoint storage, applied at once."""
        keys = ("save_experiment_best", "save_trial_best", "save_trial_latest")
        if not isinstance(value, dict) or set(value) != set(keys):
            raise UsageError(f"a GC policy gives {', '.join(keys)}")
        self._reconfigure(exp, "checkpoint_storage", value)
        self.retention.collect(self.store.experiment(exp.id))
        shown = "\n".join(f"  {k}: {value[k]}" for k in keys)
        return f"Set GC policy of experiment {exp.id} to\n{shown}"

    def _reconfigure(self, exp: Experiment, section: str, values: dict[str, Any]) -> None:
        """Part of one section of its config changed, checked as at create (a ConfigError
        names what is wrong, and nothing changes)."""
        raw = self.configs.get(exp).to_dict()
        raw[section] = {**(raw.get(section) or {}), **values}
        cfg = ExperimentConfig.from_dict(raw)
        self.journal.record(exp.id, ExperimentConfigChanged(config=cfg.to_dict()))
        self.configs.forget(exp.id)

    def delete_experiment(self, exp_id: int) -> str:
        """A finished experiment goes: its checkpoints' files (but those registered as model
        versions), its run tree, its rows. Its id is not given again."""
        exp = self.store.experiment(exp_id)
        if exp.state not in FINAL_EXPERIMENT_STATES:
            raise StateError(f"experiment {exp_id} is {exp.state}; only a finished experiment "
                             "can be deleted (kill or cancel it first)")
        ckpts = self.store.checkpoints(exp_id=exp_id)
        # A model version's files stay: the version holds where they are.
        registered = self.store.registered([c.uuid for c in ckpts])
        for ckpt in ckpts:
            if ckpt.state == CheckpointState.COMPLETED and ckpt.uuid not in registered:
                self.retention.delete(ckpt)
        # Out of the run tree first (one rename), so that a rebuild never brings it back.
        doomed = self.journal.bury(exp_id)
        self.configs.forget(exp_id)
        self.store.discard_experiment(exp_id)
        shutil.rmtree(doomed, ignore_errors=True)
        return f"Deleted experiment {exp_id}"

    def kill_trial(self, trial_id: int) -> str:
        """The trial ends as CANCELED at once; the rest of its experiment goes on."""
        trial = self.store.trial(trial_id)
        if trial.state not in FINAL_TRIAL_STATES:
            self.journal.record(trial.experiment_id, TrialStateChanged(
                trial_id=trial_id, state=TrialState.CANCELED, restarts=trial.restarts,
                reason="canceled by the user"))
            self.controls.stop(trial.experiment_id, [trial], graceful=False)
            self.controls.sync_all()
        return f"Killed trial {trial_id}"

    def delete_checkpoint(self, uuid: str) -> str:
        try:
            ckpt = self.store.checkpoint(uuid)
        except NotFoundError:
            ckpt = None
        if ckpt is None or ckpt.state != CheckpointState.COMPLETED:
            raise NotFoundError(f"checkpoint {uuid} not found (or already deleted); see "
                                "`hpcdet checkpoint list EXPERIMENT_ID`")
        self.retention.delete(ckpt)
        return f"Deleted checkpoint {uuid}"
