"""The daemon's decisions, journaled in the run tree and applied to the database.

Every state change the daemon makes is first appended to ``runs/exp-<E>/journal.jsonl`` and
then applied in one transaction that also records how far the journal has been applied. A
daemon killed between the two re-applies the entry on start; a lost database is rebuilt by
applying every journal from the beginning and re-ingesting every event log.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from sqlmodel import Session, col, select

from hpcdet.exchange import append_line
from hpcdet.paths import StatePaths
from hpcdet.store.models import Experiment, Run, Trial
from hpcdet.store.repository import Store


def _experiment_created(s: Session, e: dict[str, Any]) -> None:
    if s.get(Experiment, e["exp_id"]) is None:
        s.add(
            Experiment(
                id=e["exp_id"], name=e["name"], config_json=json.dumps(e["config"]),
                description=e.get("description") or "", resource_pool=e.get("resource_pool", ""),
                priority=e.get("priority"), backend=e["backend"], searcher=e["searcher"],
                created=e["time"],
            )
        )


def _experiment_state(s: Session, e: dict[str, Any]) -> None:
    exp = s.get(Experiment, e["exp_id"])
    if exp is not None:
        exp.state = e["state"]
        if e["state"] in ("COMPLETED", "CANCELED", "ERROR"):
            exp.ended = e["time"]
        s.add(exp)


def _trial_created(s: Session, e: dict[str, Any]) -> None:
    if s.get(Trial, e["trial_id"]) is None:
        s.add(
            Trial(
                id=e["trial_id"], experiment_id=e["exp_id"], state="QUEUED",
                hparams_json=json.dumps(e["hparams"]), trial_seed=e["trial_seed"],
            )
        )


def _trial_state(s: Session, e: dict[str, Any]) -> None:
    trial = s.get(Trial, e["trial_id"])
    if trial is None:
        return
    trial.state = e["state"]
    trial.restarts = e.get("restarts", trial.restarts)
    trial.end_reason = e.get("reason", "")
    if e["state"] in ("COMPLETED", "CANCELED", "ERROR"):
        trial.ended = e["time"]
    s.add(trial)


def _find_run(s: Session, trial_id: int, run_id: int) -> Run | None:
    q = select(Run).where(Run.trial_id == trial_id, Run.run_id == run_id)
    run: Run | None = s.exec(q).first()
    return run


def _run_submitting(s: Session, e: dict[str, Any]) -> None:
    if _find_run(s, e["trial_id"], e["run_id"]) is None:
        s.add(Run(trial_id=e["trial_id"], run_id=e["run_id"], submitted=e["time"]))
    trial = s.get(Trial, e["trial_id"])
    if trial is not None:
        trial.run_id = e["run_id"]
        trial.state = "ACTIVE"
        trial.started = trial.started or e["time"]
        s.add(trial)


def _run_submitted(s: Session, e: dict[str, Any]) -> None:
    run = _find_run(s, e["trial_id"], e["run_id"])
    if run is not None and run.state == "SUBMITTING":
        run.job_id = e["job_id"]
        run.state = "PENDING"
        s.add(run)


def _run_ended(s: Session, e: dict[str, Any]) -> None:
    run = _find_run(s, e["trial_id"], e["run_id"])
    if run is not None:
        run.state = e["job_state"]
        run.exit_code = e.get("exit_code")
        run.outcome = e.get("outcome", "")
        run.ended = e["time"]
        s.add(run)


APPLY: dict[str, Callable[[Session, dict[str, Any]], None]] = {
    "experiment_created": _experiment_created,
    "experiment_state": _experiment_state,
    "trial_created": _trial_created,
    "trial_state": _trial_state,
    "run_submitting": _run_submitting,
    "run_submitted": _run_submitted,
    "run_ended": _run_ended,
}


class Journal:
    """Appends decisions and applies them exactly once."""

    def __init__(self, paths: StatePaths, store: Store) -> None:
        self.paths = paths
        self.store = store

    def record(self, exp_id: int, kind: str, **body: Any) -> None:
        entry = {"kind": kind, "exp_id": exp_id, "time": time.time(), **body}
        path = self.paths.journal(exp_id)
        append_line(path, entry)
        self.replay(exp_id)

    def replay(self, exp_id: int) -> int:
        """Apply what the database has not seen of one experiment's journal; returns entries."""
        path = self.paths.journal(exp_id)
        with self.store.session() as s:
            exp = s.get(Experiment, exp_id)
            offset = exp.journal_offset if exp is not None else 0
            data = _read_from(path, offset)
            applied = 0
            pos = offset
            for raw in data.split(b"\n")[:-1]:
                pos += len(raw) + 1
                if not raw.strip():
                    continue
                entry = json.loads(raw)
                APPLY[entry["kind"]](s, entry)
                applied += 1
                s.flush()
            exp = s.get(Experiment, exp_id)
            if exp is not None and pos != offset:
                exp.journal_offset = pos
                s.add(exp)
        return applied

    def experiment_ids(self) -> list[int]:
        ids = []
        if self.paths.runs.exists():
            for d in self.paths.runs.iterdir():
                if d.name.startswith("exp-") and d.name[4:].isdigit():
                    ids.append(int(d.name[4:]))
        return sorted(ids)

    def replay_all(self) -> int:
        return sum(self.replay(exp_id) for exp_id in self.experiment_ids())

    def max_ids(self) -> tuple[int, int]:
        """Largest experiment and trial ids known to the database or the run tree."""
        with self.store.session() as s:
            exp_ids = list(s.exec(select(Experiment.id).order_by(col(Experiment.id).desc())))
            trial_ids = list(s.exec(select(Trial.id).order_by(col(Trial.id).desc())))
        max_exp = max([0, *exp_ids[:1], *self.experiment_ids()])
        return max_exp, (trial_ids[0] if trial_ids else 0)


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read()
    except FileNotFoundError:
        return b""
