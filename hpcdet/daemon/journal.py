"""The daemon's decisions, journaled in the run tree and applied to the database.

Every state change the daemon makes is first appended to ``runs/exp-<E>/journal.jsonl`` and
then applied (``Store.apply_journal``) in one transaction that also records how far the
journal has been applied. A daemon killed between the two re-applies the entry on start; a lost
database is rebuilt by applying every journal from the beginning and re-ingesting every event
log.

Decisions made together (a searcher's input and what it decides: up to a thousand trials at
the start of a search) are journaled with one append and applied in one transaction
(``record_all``). Of an append a crash cut short only the entries up to the first one missing
apply (``Store.apply_journal``): the state a daemon killed between recording them one by one
could leave, which the next daemon carries on from as it would from that.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from hpcdet.paths import StatePaths
from hpcdet.private import open_private, private_dir
from hpcdet.records import RunRecord as Run
from hpcdet.rundir.atomic import append_lines, report_skipped, whole_lines
from hpcdet.schedulers.base import JobStatus
from hpcdet.states import Decision, JobState
from hpcdet.store.entries import Entry, RunEnded, encode
from hpcdet.store.journal_apply import UnappliableEntry
from hpcdet.store.repository import Store

log = logging.getLogger(__name__)
# Told of each experiment's entries once they are applied (the webhooks: hpcdet.notify).
Listener = Callable[[int, Sequence[Entry]], None]


class Journal:
    """Appends decisions and applies them exactly once."""

    def __init__(self, paths: StatePaths, store: Store) -> None:
        self.paths = paths
        self.store = store
        self.recorded = 0  # entries this daemon has journaled
        self.listeners: list[Listener] = []

    def record(self, exp_id: int, entry: Entry) -> None:
        self.record_all(exp_id, [entry])

    def record_all(self, exp_id: int, entries: Sequence[Entry]) -> None:
        """Journal ``entries`` in order with one append, then apply them in one transaction;
        all of them or, when this raises, none."""
        if not entries:
            return
        now = time.time()
        path = self.paths.journal(exp_id)
        lines = [{"kind": entry.kind, "exp_id": exp_id, "time": now, **encode(entry)}
                 for entry in entries]
        if len(lines) > 1:
            for part, line in enumerate(lines):
                line["part"] = part  # see Store.apply_journal
        start = append_lines(path, lines)
        try:
            self.replay(exp_id, written_at=start)
        except Exception:
            # Not applied (a full disk, say): not decided either, or a later replay would
            # apply what the caller was told failed.
            with contextlib.suppress(OSError):
                os.truncate(path, start)
            raise
        self.recorded += len(entries)
        for listener in self.listeners:
            try:
                listener(exp_id, entries)
            except Exception:  # the decision stands; only what it would have told is lost
                log.exception("a listener of experiment %d's journal failed", exp_id)

    def replay(self, exp_id: int, written_at: int = -1) -> int:
        """Apply what the database has not seen of one experiment's journal; returns entries.

        A damaged entry (not JSON, an unknown kind, fields its kind cannot use) is skipped and
        reported with its offset, and the rest applied: the line stays in the journal, and the
        experiment keeps everything else it recorded (putting it in ERROR instead would stop
        its trials and its search for one unreadable line). The entries from ``written_at``
        on, just written by this daemon, are applied or the error of one raised.
        """
        return self._replay(self.paths.journal(exp_id), written_at,
                            lambda *args: self.store.apply_journal(exp_id, *args))

    def _replay(self, path: Path, written_at: int, apply: Callable[..., int]) -> int:
        skip: set[int] = set()
        while True:
            try:
                return apply(lambda offset: whole_lines(path, offset), skip,
                             lambda start, why: report_skipped(path, start, why))
            except UnappliableEntry as e:  # the session rolled back its partial changes
                if 0 <= written_at <= e.start:
                    raise e.error from None
                report_skipped(path, e.start, f"an entry that cannot be applied ({e.error!r})")
                skip.add(e.start)

    def record_registry(self, entry: Entry) -> None:
        """Journal a decision of the model registry in its own journal (private: 0600 in a
        0700 directory, also in a state directory shared with a group), then apply it."""
        path = self.paths.registry_journal()
        private_dir(path.parent)
        os.close(open_private(path))
        start = append_lines(path, [{"kind": entry.kind, "exp_id": 0, "time": time.time(),
                                     **encode(entry)}])
        try:
            self.replay_registry(written_at=start)
        except Exception:
            with contextlib.suppress(OSError):
                os.truncate(path, start)
            raise
        self.recorded += 1

    def replay_registry(self, written_at: int = -1) -> int:
        """``replay`` for the registry's journal."""
        path = self.paths.registry_journal()
        if not path.exists():
            return 0
        return self._replay(path, written_at, self.store.apply_registry_journal)

    def experiment_ids(self) -> list[int]:
        return self._ids("exp-")

    def _ids(self, prefix: str) -> list[int]:
        ids = []
        if self.paths.runs.exists():
            for d in self.paths.runs.iterdir():
                if d.name.startswith(prefix) and d.name[len(prefix):].isdigit():
                    ids.append(int(d.name[len(prefix):]))
        return sorted(ids)

    def bury(self, exp_id: int) -> Path:
        """Take a deleted experiment out of the run tree: its directory is renamed (returned,
        for the caller to remove) and a tombstone, holding the largest trial id so far, keeps
        its ids from being given again."""
        (self.paths.runs / f"deleted-{exp_id}").write_text(f"{self.max_ids()[1]}\n")
        source = self.paths.experiment(exp_id)
        doomed = source.with_name(f"deleting-{exp_id}")
        if source.exists():
            source.replace(doomed)
        return doomed

    def replay_all(self) -> int:
        return sum(self.replay(exp_id) for exp_id in self.experiment_ids()
                   ) + self.replay_registry()

    def max_ids(self) -> tuple[int, int]:
        """Largest experiment and trial ids known to the database or the run tree."""
        max_exp, max_trial = self.store.max_ids()
        buried = self._ids("deleted-")
        for exp_id in buried:
            text = (self.paths.runs / f"deleted-{exp_id}").read_text().strip()
            max_trial = max(max_trial, int(text) if text.isdigit() else 0)
        return max(max_exp, *self.experiment_ids(), *buried, 0), max_trial

    def run_ended(
        self, exp_id: int, run: Run, decision: Decision, *, job_state: JobState, outcome: str,
        exit_code: int | None = None, started: float | None = None,
        used: JobStatus | None = None, usage_by: str = "",
    ) -> None:
        """A run's end and what its trial does next: one decision, one entry (with when its
        first node started and the scheduler's account of it, ``used``, from ``usage_by``)."""
        self.record(exp_id, RunEnded(
            trial_id=run.trial_id, run_id=run.run_id, exit_code=exit_code, job_state=job_state,
            outcome=outcome, trial_state=decision.trial_state, restarts=decision.restarts,
            reason=decision.reason, started=started,
            used_seconds=used.used_seconds if used else None,
            used_gpus=used.used_gpus if used else None,
            used_cpus=used.used_cpus if used else None, usage_by=usage_by if used else "",
        ))
