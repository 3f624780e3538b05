"""The store's queries: records out (``hpcdet.records``), never rows.

The web UI, the SDK and the CLI's other commands read through ``Queries`` (the database opened
read-only); the daemon through its ``Store``, which inherits them. The CLI's listings read the
same records through ``hpcdet.store.reads`` without the ORM.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from sqlalchemy import case
from sqlalchemy.orm import defer
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import col, func, select

from hpcdet.checkpoint_gc import CheckpointRecord as Kept
from hpcdet.checkpoint_gc import GCPolicy, ValidationRecord, checkpoints_to_delete
from hpcdet.config import ExperimentConfig
from hpcdet.errors import NotFoundError, StoreError
from hpcdet.records import (
    ArrayRecord,
    CheckpointRecord,
    ExperimentRecord,
    LiveRun,
    ModelRecord,
    ModelVersionRecord,
    RunRecord,
    TrialRecord,
)
from hpcdet.rundir.metric_codec import column_names, json_member, sql_step_at, sql_value_at
from hpcdet.states import (
    FINAL_EXPERIMENT_STATES,
    FINAL_TRIAL_STATES,
    LIVE_RUN_STATES,
    CheckpointState,
    TrialState,
)
from hpcdet.store import decode, ingest
from hpcdet.store.database import Database, make_engine
from hpcdet.store.entries import ExperimentQueueUpdated
from hpcdet.store.journal_apply import apply_queue_update
from hpcdet.store.limits import IDS_PER_STATEMENT, parts
from hpcdet.store.models import (
    ArrayJob,
    Checkpoint,
    Experiment,
    Model,
    ModelVersion,
    Report,
    Run,
    SearcherEvent,
    Trial,
)

# A metric row as Store._reports reads it.
_REPORT_COLUMNS = ('trial_id, run_id, seq, "group", steps_completed, ordinal, reports, '
                   "metrics_json, steps_json, times_json, batch_metrics_json, reported")


# "state IN (...)" of a live run, and its values, for the daemon's per-tick queries.
_LIVE_STATES = tuple(sorted(LIVE_RUN_STATES))
_IS_LIVE = f"state IN ({','.join('?' * len(_LIVE_STATES))})"
_FINAL_STATES = tuple(sorted(FINAL_EXPERIMENT_STATES))
_IS_UNFINISHED = f"state NOT IN ({','.join('?' * len(_FINAL_STATES))})"
# The unfinished experiments, which the daemon asks for several times a tick: built once.
_UNFINISHED = select(Experiment).where(
    col(Experiment.state).not_in(_FINAL_STATES)).order_by(col(Experiment.id))

# Live runs asked for by (trial, run) in the query itself, up to this many (two SQL variables
# each, under the oldest SQLite's limit); more are read with the rest and picked out.
_ASKED_RUNS = 400


class Queries(Database):
    """The database of one state directory opened read-only, and every query of it: records
    out, never rows. The daemon's ``Store`` adds the writes."""

    def __init__(self, path: Path, immutable: bool = False) -> None:
        """``immutable``: the daemon's copy (``Store.copy_to``)."""
        self.path = path
        self._experiment_of: dict[int, int] = {}
        if not path.exists():
            raise StoreError(f"no database at {path}; start the daemon with `hpcdet daemon start`")
        self.engine = make_engine(path, readonly=True, immutable=immutable)

    def experiment_of_request(self, request_id: str) -> int | None:
        """The experiment the create request ``request_id`` made, if it made one."""
        with self.session() as s:
            q = select(Experiment.id).where(Experiment.request_id == request_id)
            return s.exec(q).first()

    def experiments(self, unfinished: bool = False, config: bool = True
                    ) -> list[ExperimentRecord]:
        """Every experiment (or the unfinished ones); without ``config``, their config_json is
        left unread (a listing of thousands need not decode kilobytes each), and reads as
        "{}"."""
        with self.session() as s:
            q = _UNFINISHED if unfinished else select(Experiment).order_by(col(Experiment.id))
            if not config:
                # SQLModel types the column as Mapped[str]; defer() takes the same attribute.
                q = q.options(defer(Experiment.config_json, raiseload=True))  # type: ignore[arg-type]
            found = list(s.exec(q))
            if not config:
                for exp in found:
                    set_committed_value(exp, "config_json", decode.UNREAD_CONFIG)
            return [decode.experiment(vars(exp)) for exp in found]

    def trial_work(self) -> dict[int, tuple[int, float]]:
        """Per experiment: its trials, and their work done (1 for a completed trial, else its
        progress), summed in SQL."""
        with self.session() as s:
            q = select(Trial.experiment_id, func.count(), func.sum(case(
                (col(Trial.state) == TrialState.COMPLETED, 1.0), else_=col(Trial.progress)))
            ).group_by(col(Trial.experiment_id))
            return {int(e): (int(n), float(done or 0.0)) for e, n, done in s.exec(q)}

    def experiment(self, exp_id: int) -> ExperimentRecord:
        with self.session() as s:
            exp = s.get(Experiment, exp_id)
            if exp is None:
                raise NotFoundError(f"experiment {exp_id} not found; `hpcdet experiment list`")
            return decode.experiment(vars(exp))

    def trials(self, exp_id: int | None = None, state: TrialState | None = None,
               ids: Sequence[int] | None = None) -> list[TrialRecord]:
        q = select(Trial).order_by(col(Trial.id))
        if exp_id is not None:
            q = q.where(Trial.experiment_id == exp_id)
        if state is not None:
            q = q.where(Trial.state == state)
        with self.session() as s:
            if ids is None:
                return [decode.trial(vars(t)) for t in s.exec(q)]
            return [decode.trial(vars(t)) for part in parts(ids)
                    for t in s.exec(q.where(col(Trial.id).in_(part)))]

    def requests_created(self, exp_id: int) -> int:
        """One past the highest search request id of the experiment's trials (0 if none)."""
        with self.session() as s:
            q = select(func.max(Trial.request_id)).where(Trial.experiment_id == exp_id)
            highest = s.exec(q).one()
            return 0 if highest is None else int(highest) + 1

    def trial(self, trial_id: int) -> TrialRecord:
        with self.session() as s:
            t = s.get(Trial, trial_id)
            if t is None:
                raise NotFoundError(f"trial {trial_id} not found; `hpcdet experiment describe N`")
            return decode.trial(vars(t))

    def experiment_of(self, trial_id: int) -> int:
        """The experiment of a trial, remembered: it never changes, and the daemon's loop asks
        for every live run on every tick."""
        exp_id = self._experiment_of.get(trial_id)
        if exp_id is None:
            exp_id = self._experiment_of[trial_id] = self.trial(trial_id).experiment_id
        return exp_id

    def runs(self, trial_ids: Sequence[int] | None = None, live_only: bool = False
             ) -> list[RunRecord]:
        q = select(Run).order_by(col(Run.trial_id), col(Run.run_id))
        if live_only:
            q = q.where(col(Run.state).in_(sorted(LIVE_RUN_STATES)))
        with self.session() as s:
            if trial_ids is None:
                return [decode.run(vars(r)) for r in s.exec(q)]
            return [decode.run(vars(r)) for part in parts(trial_ids)
                    for r in s.exec(q.where(col(Run.trial_id).in_(part)))]

    def current_runs(self, trials: Iterable[TrialRecord]) -> list[RunRecord]:
        """Each trial's current run (its ``run_id``), asked together; a trial without one has
        none in the list."""
        current = {(t.id, t.run_id) for t in trials}
        return [run for run in self.runs([trial_id for trial_id, _ in current])
                if (run.trial_id, run.run_id) in current]

    def live_job_ids(self) -> list[str]:
        """The scheduler's ids of the live runs (a run not yet submitted has none)."""
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                f"SELECT job_id FROM run WHERE {_IS_LIVE} AND job_id != '' "
                "ORDER BY trial_id, run_id", _LIVE_STATES)
            return [str(job_id) for job_id, in rows]

    def live_jobs(self) -> list[tuple[int, str]]:
        """(experiment, the scheduler's id) of each live run's job, once each."""
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT DISTINCT trial.experiment_id, run.job_id FROM run "
                f"JOIN trial ON trial.id = run.trial_id WHERE run.{_IS_LIVE} "
                "AND run.job_id != ''", _LIVE_STATES)
            return [(int(exp_id), str(job_id)) for exp_id, job_id in rows]

    def live_run_jobs(self) -> list[tuple[int, int, int, str]]:
        """(experiment, trial, run, the scheduler's id) of each submitted live run."""
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT trial.experiment_id, run.trial_id, run.run_id, run.job_id FROM run "
                f"JOIN trial ON trial.id = run.trial_id WHERE run.{_IS_LIVE} "
                "AND run.job_id != ''", _LIVE_STATES)
            return [(int(e), int(t), int(r), str(j)) for e, t, r, j in rows]

    def best_validation(self, exp_id: int, smaller_is_better: bool) -> float | None:
        """The best of the experiment's trials' best validation values, if any."""
        pick = "min" if smaller_is_better else "max"
        with self.engine.connect() as conn:
            value = conn.exec_driver_sql(
                f"SELECT {pick}(best_validation) FROM trial WHERE experiment_id = ?",
                (exp_id,)).scalar()
        return None if value is None else float(value)

    def live_runs(self, of: Collection[tuple[int, int]] | None = None) -> list[LiveRun]:
        """The live runs (or those of them given as (trial, run)), with their trials' say, by
        trial and run."""
        where = f"run.{_IS_LIVE}"
        asked: tuple[int, ...] = ()
        if of is not None and len(of) <= _ASKED_RUNS:
            if not of:
                return []
            where += " AND (run.trial_id, run.run_id) IN (VALUES " + ", ".join(
                "(?, ?)" for _ in of) + ")"
            asked = tuple(n for key in of for n in key)
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT run.trial_id, run.run_id, run.job_id, run.state, run.event_offset, "
                "run.event_seq, run.searcher_seq, run.first_op, run.ops_decided, "
                "trial.experiment_id, trial.stop_requested, trial.ops_json "
                f"FROM run JOIN trial ON trial.id = run.trial_id WHERE {where} "
                "ORDER BY run.trial_id, run.run_id", (*_LIVE_STATES, *asked)).fetchall()
        runs = [decode.live_run(row) for row in rows]
        if of is not None and not asked:
            runs = [run for run in runs if (run.trial_id, run.run_id) in of]
        return runs

    def any_live_run(self) -> bool:
        with self.engine.connect() as conn:
            return bool(conn.exec_driver_sql(
                f"SELECT EXISTS (SELECT 1 FROM run WHERE {_IS_LIVE})", _LIVE_STATES).scalar())

    def any_unfinished_experiment(self) -> bool:
        with self.engine.connect() as conn:
            return bool(conn.exec_driver_sql(
                f"SELECT EXISTS (SELECT 1 FROM experiment WHERE {_IS_UNFINISHED})",
                _FINAL_STATES).scalar())

    def any_unfinished_trial(self, exp_id: int) -> bool:
        final = sorted(FINAL_TRIAL_STATES)
        with self.engine.connect() as conn:
            return bool(conn.exec_driver_sql(
                "SELECT EXISTS (SELECT 1 FROM trial WHERE experiment_id = ? AND state NOT IN "
                f"({','.join('?' * len(final))}))", (exp_id, *final)).scalar())

    def trial_states(self, exp_id: int) -> list[str]:
        """The states of the experiment's trials, by id."""
        with self.engine.connect() as conn:
            return [str(state) for state, in conn.exec_driver_sql(
                "SELECT state FROM trial WHERE experiment_id = ? ORDER BY id", (exp_id,))]

    def unreported_exits(self, exp_id: int) -> list[TrialRecord]:
        """The experiment's trials that ended and whose search has not heard so, by id."""
        with self.session() as s:
            q = select(Trial).where(
                Trial.experiment_id == exp_id, col(Trial.state).in_(sorted(FINAL_TRIAL_STATES)),
                col(Trial.exit_reported).is_(False)).order_by(col(Trial.id))
            return [decode.trial(vars(t)) for t in s.exec(q)]


    def checkpoint(self, uuid: str) -> CheckpointRecord:
        """One checkpoint, in whatever state."""
        with self.session() as s:
            c = s.get(Checkpoint, uuid)
            if c is None:
                raise NotFoundError(
                    f"checkpoint {uuid} not found; `hpcdet checkpoint list EXPERIMENT_ID`"
                )
            return decode.checkpoint(vars(c))

    def checkpoints(
        self, exp_id: int | None = None, trial_id: int | None = None
    ) -> list[CheckpointRecord]:
        with self.session() as s:
            q = select(Checkpoint).where(Checkpoint.state == CheckpointState.COMPLETED)
            if exp_id is not None:
                q = q.where(Checkpoint.experiment_id == exp_id)
            if trial_id is not None:
                q = q.where(Checkpoint.trial_id == trial_id)
            return [decode.checkpoint(vars(c))
                    for c in s.exec(q.order_by(col(Checkpoint.steps_completed)))]

    def models(self) -> list[ModelRecord]:
        """The model registry's models by name, each with its versions."""
        with self.session() as s:
            versions: dict[str, list[ModelVersionRecord]] = {}
            for v in s.exec(select(ModelVersion).order_by(col(ModelVersion.version))):
                versions.setdefault(v.model, []).append(_version(v))
            return [ModelRecord(name=m.name, description=m.description,
                                metadata=json.loads(m.metadata_json), created=m.created,
                                versions=tuple(versions.get(m.name, ())))
                    for m in s.exec(select(Model).order_by(col(Model.name)))]

    def model(self, name: str) -> ModelRecord:
        found = [m for m in self.models() if m.name == name]
        if not found:
            raise NotFoundError(f"model {name!r} not found; `hpcdet model list` shows the "
                                "models, `hpcdet model create NAME` makes one")
        return found[0]

    def doomed_checkpoints(self, exp_id: int, cfg: ExperimentConfig, policy: GCPolicy
                           ) -> list[CheckpointRecord]:
        """The checkpoints of the experiment's ended trials that ``policy`` does not keep: what
        retention deletes, and what `experiment set gc-policy` shows before it asks. A
        checkpoint registered as a model version is kept whatever the policy says."""
        ended = {t.id for t in self.trials(exp_id) if t.state in FINAL_TRIAL_STATES}
        ckpts = [c for c in self.checkpoints(exp_id=exp_id) if c.trial_id in ended]
        if not ckpts:
            return []
        validations = [ValidationRecord(m.trial_id, m.steps_completed, m.metrics)
                       for trial_id in ended for m in self.metrics(trial_id, "validation")]
        doomed = checkpoints_to_delete(
            [Kept(c.uuid, c.trial_id, c.steps_completed, c.reported) for c in ckpts],
            validations, policy, cfg.searcher.metric, cfg.searcher.smaller_is_better)
        registered = self.registered(doomed)
        return [c for c in ckpts if c.uuid in doomed and c.uuid not in registered]

    def registered(self, uuids: Collection[str]) -> dict[str, list[ModelVersionRecord]]:
        """The model versions each of ``uuids`` is registered as (only those that are)."""
        found: dict[str, list[ModelVersionRecord]] = {}
        with self.session() as s:
            ordered = sorted(set(uuids))
            for part in (ordered[i:i + IDS_PER_STATEMENT]
                         for i in range(0, len(ordered), IDS_PER_STATEMENT)):
                q = select(ModelVersion).where(col(ModelVersion.uuid).in_(part))
                for v in s.exec(q.order_by(col(ModelVersion.model), col(ModelVersion.version))):
                    found.setdefault(v.uuid, []).append(_version(v))
        return found

    def arrays(self, exp_id: int | None = None, submitted: bool = True) -> list[ArrayRecord]:
        """Job arrays in submission order; ``submitted=False`` adds those still without an id."""
        with self.session() as s:
            q = select(ArrayJob)
            if exp_id is not None:
                q = q.where(ArrayJob.experiment_id == exp_id)
            if submitted:
                q = q.where(ArrayJob.job_id != "")
            return [decode.array(vars(a)) for a in
                    s.exec(q.order_by(col(ArrayJob.experiment_id), col(ArrayJob.index)))]

    def run(self, trial_id: int, run_id: int) -> RunRecord | None:
        with self.session() as s:
            q = select(Run).where(Run.trial_id == trial_id, Run.run_id == run_id)
            run: Run | None = s.exec(q).first()
            return None if run is None else decode.run(vars(run))

    def searcher_events(self, exp_id: int) -> list[dict[str, Any]]:
        """The inputs fed to the experiment's searcher, in the order they were fed."""
        with self.session() as s:
            q = (select(SearcherEvent).where(SearcherEvent.experiment_id == exp_id)
                 .order_by(col(SearcherEvent.id)))
            return [decode.searcher_event(r.event_json) for r in s.exec(q)]

    def max_ids(self) -> tuple[int, int]:
        """The largest experiment and trial ids in the database (0 when none)."""
        with self.session() as s:
            exp_id = s.exec(select(func.max(Experiment.id))).one()
            trial_id = s.exec(select(func.max(Trial.id))).one()
        return int(exp_id or 0), int(trial_id or 0)



    def metrics(self, trial_id: int, group: str | None = None) -> list[Report]:
        """The trial's reports (of ``group``), in the order they were made."""
        of_group = "" if group is None else ' AND "group" = ?'
        return self._reports(
            f"SELECT {_REPORT_COLUMNS} FROM metric WHERE trial_id = ?{of_group} "
            "ORDER BY run_id, seq", (trial_id,) if group is None else (trial_id, group))

    def experiment_metrics(self, exp_id: int, group: str) -> list[Report]:
        """The ``group`` metrics of every trial of an experiment, by trial then report."""
        return self._reports(
            f"SELECT {_REPORT_COLUMNS} FROM metric WHERE \"group\" = ? AND trial_id IN "
            "(SELECT id FROM trial WHERE experiment_id = ?) ORDER BY trial_id, run_id, seq",
            (group, exp_id))

    def _reports(self, query: str, args: tuple[Any, ...]) -> list[Report]:
        """The reports of the metric rows ``query`` selects, a chunk's one by one (read
        without the ORM: a trial's curve is tens of thousands of them)."""
        found: list[Report] = []
        with self.engine.connect() as conn:
            for (trial_id, run_id, seq, group, step, ordinal, reports, metrics_json, steps_json,
                 times_json, batch_json, reported) in conn.exec_driver_sql(query, args):
                if reports == 1:
                    found.append(Report(trial_id, run_id, seq, group, step, ordinal,
                                        metrics_json, batch_json, reported))
                    continue
                found += (Report(trial_id, run_id, seq, group, step, ordinal + k, text, "", time)
                          for k, (step, text, time) in enumerate(ingest.chunk_reports(
                              reports, steps_json, metrics_json, times_json, reported)))
        return found

    def metric_series(self, trial_ids: Sequence[int], group: str, name: str, points: int
                      ) -> list[tuple[int, int, Any]]:
        """(trial id, steps completed, value) of the ``name`` metric in ``group`` reports, by
        trial and report: every report of a trial with at most ``points`` of them, else every
        k-th report from the first, and the last. Values that are not numbers come as None."""
        return [point for part in parts(trial_ids)
                for point in self._metric_series(part, group, name, points)]

    def _metric_series(self, trial_ids: list[int], group: str, name: str, points: int
                       ) -> list[tuple[int, int, Any]]:
        marks = ",".join(f"?{4 + i}" for i in range(len(trial_ids)))  # after the three below
        # The ordinals to show are generated and each is one index lookup (of the row that
        # holds it: a report's, or the chunk's whose ordinals it falls in), so a curve of
        # 10,000 reports costs what one of ``points`` does.
        query = f"""
            WITH RECURSIVE sizes AS (
                SELECT id AS trial_id, (SELECT ordinal + reports - 1 FROM metric
                                        WHERE trial_id = trial.id AND "group" = ?1
                                        ORDER BY ordinal DESC LIMIT 1) AS last
                FROM trial WHERE id IN ({marks})),
            picks(trial_id, ordinal, last, step) AS (
                SELECT trial_id, 0, last, last / ?2 + 1 FROM sizes WHERE last IS NOT NULL
                UNION ALL
                SELECT trial_id, min(ordinal + step, last), last, step FROM picks
                WHERE ordinal < last)
            SELECT m.trial_id,
              CASE m.reports WHEN 1 THEN m.steps_completed
                ELSE {sql_step_at("m.steps_json", "p.ordinal - m.ordinal")} END,
              {sql_value_at("m.metrics_json", "?3", "m.reports", "p.ordinal - m.ordinal")}
            FROM picks p JOIN metric m ON m.id = (
                SELECT id FROM metric WHERE trial_id = p.trial_id AND "group" = ?1
                AND ordinal <= p.ordinal ORDER BY ordinal DESC LIMIT 1)
            WHERE p.ordinal < m.ordinal + m.reports
            ORDER BY p.trial_id, p.ordinal"""
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                query, (group, max(1, points), json_member(name), *trial_ids)).fetchall()
        return [(int(t), int(x), v if isinstance(v, (int, float)) else None)
                for t, x, v in rows]

    def metric_names(self, trial_ids: Sequence[int]) -> dict[str, list[str]]:
        """The metric names each group of the trials' reports holds (in each trial's first
        and last report of the group)."""
        names: dict[str, list[str]] = {}
        for part in parts(trial_ids):
            for group, found in self._metric_names(part):
                have = names.setdefault(group, [])
                have += [k for k in found if k not in have]
        return names

    def _metric_names(self, trial_ids: list[int]) -> Iterator[tuple[str, list[str]]]:
        # Each trial's groups one index lookup at a time (SQLite has no skip scan without
        # ANALYZE), then two reports per trial and group.
        marks = ",".join("?" * len(trial_ids))
        query = f"""
            WITH RECURSIVE pairs(trial_id, grp) AS (
                SELECT id, (SELECT min("group") FROM metric WHERE trial_id = trial.id)
                FROM trial WHERE id IN ({marks})
                UNION ALL
                SELECT trial_id, (SELECT min("group") FROM metric
                                  WHERE trial_id = pairs.trial_id AND "group" > pairs.grp)
                FROM pairs WHERE grp IS NOT NULL)
            SELECT p.grp, m.reports, m.metrics_json FROM pairs p
            JOIN metric m ON m.trial_id = p.trial_id AND m."group" = p.grp
              AND m.ordinal IN (0, (SELECT max(ordinal) FROM metric
                                    WHERE trial_id = p.trial_id AND "group" = p.grp))
            ORDER BY p.trial_id, m.ordinal"""
        with self.engine.connect() as conn:
            for group, reports, metrics_json in conn.exec_driver_sql(query, tuple(trial_ids)):
                yield group, (list(json.loads(metrics_json)) if reports == 1
                              else column_names(metrics_json))


def queue_update_preview(exp: ExperimentRecord, update: dict[str, Any]) -> ExperimentRecord:
    """``exp`` with a queue update applied as the journal will apply it (nothing stored)."""
    row = Experiment(**{f.name: getattr(exp, f.name) for f in fields(exp)
                        if f.name not in ("labels", "config_source")},
                     labels_json=json.dumps(list(exp.labels)),
                     config_json=json.dumps(exp.config.to_dict()))
    apply_queue_update(row, ExperimentQueueUpdated(**update))
    return replace(decode.experiment(vars(row)),
                   config_source=decode.StoredConfig(exp.id, row.config_json, cached=False))


def _version(v: ModelVersion) -> ModelVersionRecord:
    return ModelVersionRecord(model=v.model, version=v.version, uuid=v.uuid,
                              experiment_id=v.experiment_id, trial_id=v.trial_id,
                              steps_completed=v.steps_completed, storage=v.storage,
                              registered=v.registered)
