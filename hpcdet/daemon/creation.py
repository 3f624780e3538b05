"""Creating an experiment: its id, its directory with the context snapshot, its first journal
entry and the start of its search, all or nothing; a request carried out again answers with
the experiment it created."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from hpcdet import images, short_jobs, trialside
from hpcdet.config import ExperimentConfig
from hpcdet.config.task import TASK_KINDS
from hpcdet.config.unapplied import not_applied, other_sections
from hpcdet.containers import ContainerSpec
from hpcdet.daemon.configs import Configs
from hpcdet.daemon.guard import Guard
from hpcdet.daemon.jobspec import (
    container_problems,
    container_spec,
    container_warnings,
    trusted_storage,
)
from hpcdet.daemon.journal import Journal
from hpcdet.daemon.searching import SearchDriver
from hpcdet.daemon.submission import Submission
from hpcdet.errors import (
    ConfigError,
    DiskFullError,
    HpcdetError,
    NotFoundError,
    StateError,
    UsageError,
    disk_full_cause,
    disk_full_reason,
)
from hpcdet.paths import StatePaths, hostname
from hpcdet.rundir.atomic import write_atomic
from hpcdet.schedulers.templating import check_template_dir
from hpcdet.states import CheckpointState, ExperimentState, TrialState
from hpcdet.store.entries import ExperimentCreated, ExperimentStateChanged
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)

SHARED_ENVIRONMENT = (
    "trials run with {python}, the Python environment hpcdet itself runs from. Each trial gets "
    "a private overlay of it, so that what a startup hook or the trial installs stays out of "
    "hpcdet's packages; keep the two apart by installing hpcdet on its own (`pipx install "
    "hpcdet`) and naming your training environment's python in environment.python")


class Creation:
    def __init__(self, store: Store, journal: Journal, paths: StatePaths, configs: Configs,
                 search: SearchDriver, guard: Guard, submission: Submission) -> None:
        self.store = store
        self.journal = journal
        self.paths = paths
        self.configs = configs
        self.search = search
        self.guard = guard
        self.submission = submission
        self.backend = submission.backend

    def create(
        self, config: dict[str, Any], staging: str, request_id: str = "", python: str = "",
        paused: bool = False, convert: bool = False, task: str = "",
    ) -> dict[str, Any]:
        """``request_id``: the CLI's; the same request carried out again (a daemon that died
        before its reply was written) answers with the experiment it created. ``convert``:
        the CLI converts the trials' image, and the pull lock is taken for it before the jobs
        are submitted (``hpcdet.images.reserve``).

        Once the request is taken the snapshot in ``staging`` is the daemon's (the CLI may have
        stopped waiting): it is moved into the experiment, or removed with any other answer.
        ``task``: the kind of interactive task the config runs ("" for an experiment).
        """
        try:
            return self._create(config, staging, request_id, python, paused, convert, task)
        finally:
            self._drop_staging(Path(staging))

    def _drop_staging(self, staging: Path) -> None:
        # Only the CLI's own snapshots: a request names its path, which could be anything.
        if staging.parent.resolve() == self.paths.requests.resolve():
            shutil.rmtree(staging, ignore_errors=True)

    def _create(self, config: dict[str, Any], staging: str, request_id: str,
                python: str, paused: bool = False, convert: bool = False, task: str = ""
                ) -> dict[str, Any]:
        made = self.store.experiment_of_request(request_id) if request_id else None
        if made is not None:  # sent again (a laptop whose connection dropped): answered once
            return self._reply_again(made)
        if task and task not in TASK_KINDS:
            raise UsageError(f"there is no kind of task {task!r}; it is one of "
                             f"{', '.join(TASK_KINDS)}")
        cfg = ExperimentConfig.from_dict(self._over_default_storage(config))
        if not cfg.environment.has_image:
            cfg = cfg.filled("environment", python=self._choose_python(cfg.environment.python,
                                                                        python))
        source = self._warm_start(cfg)
        if source is not None and source != cfg.searcher.source_checkpoint_uuid:
            cfg = cfg.filled("searcher", source_checkpoint_uuid=source)  # the trials' start
        problems = container_problems(cfg, self.submission.cluster)
        if problems:
            raise ConfigError(problems)
        check_template_dir(self.submission.cluster.template_dir)
        storage = trusted_storage(cfg, self.paths)
        if storage is not None:
            raise ConfigError([f"checkpoint_storage.host_path: {storage}"])
        raw = cfg.to_dict()
        if not os.path.isdir(staging):
            raise StateError(f"the context snapshot {staging} is gone: the CLI gave up on this "
                             "request before the daemon took it. Create the experiment again.")
        exp_id = self.journal.max_ids()[0] + 1
        exp_dir = self.paths.experiment(exp_id)
        try:
            exp_dir.mkdir(parents=True)
            os.replace(staging, self.paths.context(exp_id))
            write_atomic(self.paths.experiment_record(exp_id), {"id": exp_id, "config": raw})
            self.journal.record(exp_id, ExperimentCreated(
                name=cfg.name, config=raw, description=cfg.description, labels=cfg.labels,
                backend=self.backend, resource_pool=cfg.resources.resource_pool,
                priority=cfg.resources.priority, weight=cfg.resources.weight,
                searcher=cfg.searcher.name, request_id=request_id or None, task=task))
            with self.guard(exp_id, "starting the search", deferrable=False):
                self.search.start(self.store.experiment(exp_id), cfg)
            if paused:  # its first trials wait, PAUSED, for `experiment activate`
                self.journal.record(exp_id, ExperimentStateChanged(state=ExperimentState.PAUSED,
                                    cascade=True))
        except Exception as e:
            self._discard_experiment(exp_id)
            if disk_full_cause(e) is None:
                raise
            raise DiskFullError(f"experiment {exp_id} in {exp_dir}", e,
                                "experiment not created: ") from e
        container = self._container(cfg)
        reserved = ""  # the holder of the image's pull lock, taken for the CLI
        if convert and container is not None:
            holder = f"hpcdet experiment create of experiment {exp_id} on {hostname()}"
            reserved = holder if images.reserve(container, holder, container.force_pull) else ""
        waiting = ""
        try:
            self.submission.submit_queued()
        except Exception as e:  # the experiment exists: saying the create failed would be wrong
            if disk_full_cause(e) is None:
                if container is not None:  # no CLI comes for it: the jobs pull
                    images.release(container, reserved)
                raise
            waiting = (f"its trials wait to be submitted: {disk_full_reason(e)} while writing "
                       "their run directories; they go once space is freed")
        return self._create_reply(exp_id, cfg, container, waiting, reserved)

    def _warm_start(self, cfg: ExperimentConfig) -> str | None:
        """The checkpoint the trials start from: ``searcher.source_trial_id``'s latest, else
        ``searcher.source_checkpoint_uuid``, as Determined chooses; None for a cold start.

        Raises:
            ConfigError: no such trial or checkpoint, a trial without a checkpoint, or one the
                trials could not read from their own checkpoint storage.
        """
        searcher, at = cfg.searcher, "searcher.source_trial_id"
        if searcher.source_trial_id is not None:
            trial_id = searcher.source_trial_id
            try:
                self.store.trial(trial_id)
            except NotFoundError:
                raise ConfigError([f"{at}: there is no trial {trial_id}; "
                                   "`hpcdet experiment list` and `hpcdet experiment describe`"
                                   " show the trials there are"]) from None
            done = self.store.checkpoints(trial_id=trial_id)
            if not done:
                raise ConfigError([f"{at}: no checkpoint found for source trial {trial_id}; "
                                   "warm-start from a trial that reported one"])
            source = done[-1]
        elif searcher.source_checkpoint_uuid is not None:
            at = "searcher.source_checkpoint_uuid"
            try:
                source = self.store.checkpoint(searcher.source_checkpoint_uuid)
            except NotFoundError as e:
                raise ConfigError([f"{at}: {e}"]) from None
            if source.state != CheckpointState.COMPLETED:
                raise ConfigError([f"{at}: checkpoint {source.uuid} is {source.state}; "
                                   "warm-start from a COMPLETED one"])
        else:
            return None
        # Trials restore from their own experiment's checkpoint storage.
        default = self.paths.default_checkpoints()
        there = self.configs.get(self.store.experiment(source.experiment_id)).checkpoint_dir(
            default)
        here = cfg.checkpoint_dir(default)
        if os.path.realpath(there) != os.path.realpath(here):
            raise ConfigError([
                f"{at}: checkpoint {source.uuid} is in {there}, and this experiment's trials "
                f"read checkpoints from {here}; give this experiment the same "
                f"checkpoint_storage as experiment {source.experiment_id}"])
        return source.uuid

    def _over_default_storage(self, config: dict[str, Any]) -> dict[str, Any]:
        """The config as given, over the state directory's checkpoint storage when it names
        none (or only GC settings), before its one parse fills in that storage's defaults."""
        storage = config.get("checkpoint_storage")
        if storage is not None and (not isinstance(storage, dict) or "type" in storage):
            return config  # its own storage, or a shape the validation names
        default = {"type": "shared_fs", "host_path": str(self.paths.default_checkpoints())}
        return {**config, "checkpoint_storage": {**default, **(storage or {})}}

    def _choose_python(self, configured: str | None, submitted: str) -> str:
        """``environment.python`` of a config without an image: the config's own, the cluster
        config's, or the ``python3`` on PATH where the experiment was created.

        Raises:
            ConfigError: when there is none, or it cannot run (before anything is stored).
        """
        cluster = self.submission.cluster
        chosen, said = next(
            ((p, field) for p, field in ((configured, "environment.python"),
                                         (cluster.python, "python (cluster config)"),
                                         (submitted, "environment.python"),
                                         # a client that sent none: the daemon's own PATH
                                         (shutil.which("python3"), "environment.python"))
             if p),
            (None, "environment.python"))
        if chosen is None:
            raise ConfigError(["environment.python: there was no python3 on PATH where the "
                               "experiment was created; set it to the interpreter your trials "
                               "run with, e.g. /opt/venvs/train/bin/python3"])
        return trialside.probe(chosen, said).path

    def _create_reply(self, exp_id: int, cfg: ExperimentConfig, container: ContainerSpec | None,
                      waiting: str, reserved: str = "") -> dict[str, Any]:
        """``container``: the trials' image (``_container``); ``reserved``: the holder of its
        pull lock taken for the CLI."""
        trials = self.store.trials(exp_id)
        reasons = [self.store.experiment(exp_id).error, waiting]
        reasons += [t.end_reason for t in trials if t.state == TrialState.ERROR]
        if cfg.resources.weight != 1:
            reasons.append(f"resources.weight {cfg.resources.weight:g} is stored but not "
                           f"applied: {self.backend} has no per-job fair-share weight")
        section = self.submission.scheduler.options(cfg).section
        if cfg.environment.python and trialside.probe(cfg.environment.python).is_hpcdets:
            reasons.append(SHARED_ENVIRONMENT.format(python=cfg.environment.python))
        reasons += container_warnings(cfg, self.submission.cluster)
        reasons.append(short_jobs.at_create(cfg, self.submission.cluster))
        warning = "\n".join([r for r in reasons if r] + not_applied(cfg.raw, cfg.is_trial_class)
                             + other_sections(cfg.raw, section, self.backend))
        return {"experiment_id": exp_id, "trial_ids": [t.id for t in trials],
                "warning": warning, "image": container.to_dict() if container else None,
                "image_reserved": reserved}

    def _container(self, cfg: ExperimentConfig) -> ContainerSpec | None:
        sub = self.submission
        return container_spec(cfg, sub.cluster, sub.site.placement(cfg), self.paths)

    def _reply_again(self, exp_id: int) -> dict[str, Any]:
        cfg = self.configs.get(self.store.experiment(exp_id))
        return self._create_reply(exp_id, cfg, self._container(cfg), "")

    def _discard_experiment(self, exp_id: int) -> None:
        """Undo a create that failed midway: no rows, no directory, its id free again."""
        self.search.forget(exp_id)
        self.configs.forget(exp_id)
        # The directory first: that frees the space the database needs to forget the rows.
        shutil.rmtree(self.paths.experiment(exp_id), ignore_errors=True)
        try:
            self.store.discard_experiment(exp_id)
        except HpcdetError:
            log.exception("cannot remove the rows of experiment %d, which failed to create",
                          exp_id)
