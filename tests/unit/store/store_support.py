"""Building a store's state the way the daemon and trials do: journal entries appended to an
experiment's journal and applied, events written by the trial side's writer."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hpcdet.rundir.atomic import append_lines, whole_lines
from hpcdet.rundir.event_writer import EventWriter
from hpcdet.store.ingest import BestOf
from hpcdet.store.repository import Store

CONFIG = {"name": "x", "entrypoint": "true",
          "searcher": {"name": "single", "metric": "loss", "max_length": 1}}
LOSS_SEARCHER = BestOf("loss", smaller_is_better=True)


class Journaled:
    """A store and one journal file per experiment, as the daemon keeps them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = Store(root / "hpcdet.db")
        self.reported: list[tuple[int, str]] = []

    def journal(self, exp_id: int) -> Path:
        return self.root / f"exp-{exp_id}.jsonl"

    def write(self, exp_id: int, kind: str, **body: Any) -> int:
        """Append an entry without applying it; returns where it starts."""
        return self.write_all(exp_id, [(kind, body)])

    def write_all(self, exp_id: int, entries: list[tuple[str, dict[str, Any]]]) -> int:
        """Append entries (kind, body) in one write without applying them; returns where the
        first starts."""
        return append_lines(self.journal(exp_id), [
            {"kind": kind, "exp_id": exp_id, "time": body.pop("time", time.time()), **body}
            for kind, body in entries])

    def apply(self, exp_id: int, skip: set[int] | None = None) -> int:
        path = self.journal(exp_id)
        return self.store.apply_journal(
            exp_id, lambda offset: whole_lines(path, offset), skip or set(),
            lambda start, why: self.reported.append((start, why)))

    def record(self, exp_id: int, kind: str, **body: Any) -> None:
        self.write(exp_id, kind, **body)
        self.apply(exp_id)

    def experiment(self, exp_id: int = 1, **config: Any) -> None:
        self.record(exp_id, "experiment_created", name=f"e{exp_id}", config={**CONFIG, **config},
                    backend="slurm", searcher="single")

    def trial(self, exp_id: int, trial_id: int, request_id: int = 0) -> None:
        self.record(exp_id, "trial_created", trial_id=trial_id, hparams={"lr": 0.1},
                    trial_seed=7, request_id=request_id)

    def run(self, exp_id: int, trial_id: int, run_id: int = 1, job_id: str = "") -> None:
        self.record(exp_id, "run_submitting", trial_id=trial_id, run_id=run_id)
        if job_id:
            self.record(exp_id, "run_submitted", trial_id=trial_id, run_id=run_id,
                        job_id=job_id)


def one_run(root: Path) -> Journaled:
    """Experiment 1 with trial 1 and its run 1 (job 101) submitted."""
    j = Journaled(root)
    j.experiment(1)
    j.trial(1, 1)
    j.run(1, 1, job_id="101")
    return j


def write_events(path: Path, *events: tuple[str, dict[str, Any]], one_flush: bool = False
                 ) -> None:
    """Events as a trial writes them (sequence numbers continue the file's): a line each, as
    flushes of one event write them, or in ``one_flush``, which writes consecutive training
    reports as one chunk line."""
    writer = EventWriter(path)
    for type_, body in events:
        writer.emit(type_, body)
        if not one_flush:
            writer.flush()
    writer.close()
