"""Daemon ingest: metric reports per second from a run's event log into SQLite, and the memory
that reading a backlog costs.

Usage: ``python -m bench.ingest [ROWS] [REPEATS]`` (default 100000 3).

The real path: an event log written by the trial side's ``EventWriter`` (as the Core API
writes it: a validation every 10th report, a flush every 1,000), stored by
``Store.ingest_events`` as the daemon's feed does, in batches as the daemon reads them. The
baselines, in the same run: the same rows (a chunk row holds the training reports of a flush
between two validations) put into the same table of a fresh database by one raw
``executemany``, on a connection with the store's settings; and a row for each report, as
the store kept them before chunks. The target is judged on the median of each repeat's
ratio: a repeat's ingest and raw insert share their moment of the machine.

Backlog: a log of ten times ROWS reports that grew while the daemon was stopped, ingested in a
fresh process as the daemon's start does (``Ingestion.ingest``: batches of ``BATCH_BYTES`` until the
end); the baseline reads it in one batch, as every ingest did before 2026-11-27.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.figures import Figure, median
from bench.sandbox import REPO
from hpcdet.rundir import events as event_log
from hpcdet.rundir.event_writer import EventWriter
from hpcdet.store.ingest import BestOf
from hpcdet.store.repository import Store


def _store(path: Path) -> Store:
    store = Store(path)
    now = time.time()
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO experiment (id, name, state, config_json, description, labels_json, "
            "archived, resource_pool, weight, position, backend, searcher, created, "
            "journal_offset, progress, actions_done, searcher_done, error, request_id) VALUES "
            "(1, 'ingest', 'ACTIVE', '{}', '', '[]', 0, '', 1.0, 0, 'local', 'single', ?, 0, "
            "0, 0, 0, '', '')", (now,))
        conn.exec_driver_sql(
            "INSERT INTO trial (id, experiment_id, request_id, ops_json, ops_completed, closed, "
            "stop_requested, early_exit, exit_reported, state, hparams_json, trial_seed, "
            "restarts, run_id, steps_completed, progress, status, metadata_json, alerts_json, "
            "end_reason) VALUES (1, 1, 0, '[]', 0, 0, 0, '', 0, 'ACTIVE', '{}', 0, 0, 1, 0, 0, "
            "'', '{}', '[]', '')")
        conn.exec_driver_sql(
            "INSERT INTO run (trial_id, run_id, job_id, state, reason, submitted, preempt_acked,"
            " outcome, event_offset, event_seq, searcher_seq, first_op, ops_decided) VALUES "
            "(1, 1, '1', 'RUNNING', '', ?, 0, '', 0, 0, 0, 0, 0)", (now,))
    return store


def _events(path: Path, rows: int) -> None:
    writer = EventWriter(path)
    for step in range(1, rows + 1):
        group = "validation" if step % 10 == 0 else "training"
        writer.emit("metrics", {"group": group, "steps_completed": step, "metrics": {
            "loss": 1.0 / step, "accuracy": 0.5, "lr": 1e-3, "epoch": step // 500}})
        if step % 1000 == 0:
            writer.flush()
    writer.close()


def once(root: Path, rows: int) -> tuple[float, float, float]:
    """(reports/s through ingest_events, by raw executemany of the same rows, and of a row
    per report) for one fresh database."""
    events = root / "events.jsonl"
    _events(events, rows)
    store = _store(root / "hpcdet.db")
    best = BestOf("loss", smaller_is_better=True)
    start = time.perf_counter()
    while store.ingest_events(1, 1, events, best).last_seq is not None:
        pass
    ours = rows / (time.perf_counter() - start)
    stored = store.metrics(1)
    assert len(stored) == rows, (len(stored), rows)
    store.close()

    raw = _raw_rows(root, store_rows(root / "hpcdet.db"), rows)
    one_each = _raw_rows(root, [
        (1, 1, m.seq, m.group, m.steps_completed, m.steps_completed, m.ordinal, 1,
         m.metrics_json, "", "", "", m.reported) for m in stored], rows)
    for path in root.iterdir():
        path.unlink()
    return ours, raw, one_each


def store_rows(db: Path) -> list[tuple[Any, ...]]:
    """The metric table's rows as the store left them."""
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT {', '.join(COLUMNS)} FROM metric ORDER BY id").fetchall()


COLUMNS = ("trial_id", "run_id", "seq", '"group"', "steps_completed", "last_step", "ordinal",
           "reports", "metrics_json", "steps_json", "times_json", "batch_metrics_json",
           "reported")


def _raw_rows(root: Path, batch: list[tuple[Any, ...]], reports: int) -> float:
    """Reports/s of one executemany of ``batch`` into a new table of the store's schema, on a
    connection set up as the store's (``hpcdet.store.repository``): WAL, synchronous=NORMAL
    and foreign keys checked, each row's trial looked up in a table of its own."""
    raw_db = root / "raw.db"
    raw_db.unlink(missing_ok=True)
    conn = sqlite3.connect(raw_db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.executescript("CREATE TABLE trial (id INTEGER PRIMARY KEY); INSERT INTO trial VALUES (1);"
                       + ";".join(sqlite3.connect(root / "hpcdet.db").execute(
                           "SELECT group_concat(sql, ';') FROM sqlite_master WHERE sql NOT NULL "
                           "AND (tbl_name = 'metric')").fetchone()))
    start = time.perf_counter()
    with conn:
        conn.executemany(f"INSERT INTO metric ({', '.join(COLUMNS)}) "
                         f"VALUES ({', '.join('?' * len(COLUMNS))})", batch)
    elapsed = time.perf_counter() - start
    conn.close()
    for path in root.glob("raw.db*"):
        path.unlink()
    return reports / elapsed


def backlog(root: Path, limit: int) -> tuple[float, float]:
    """(peak RSS growth in bytes, seconds) of a fresh process ingesting ``root``'s
    events.jsonl in batches of ``limit`` bytes."""
    out = subprocess.run([sys.executable, "-m", "bench.ingest", "--backlog", str(root),
                          str(limit)], capture_output=True, text=True, check=True, cwd=REPO)
    grown, seconds = out.stdout.split()
    return float(grown), float(seconds)


def _backlog_child(root: Path, limit: int) -> None:
    store = _store(root / f"backlog-{limit}.db")
    best = BestOf("loss", smaller_is_better=True)
    event_log.BATCH_BYTES = limit
    before = _peak_rss()
    start = time.perf_counter()
    while store.ingest_events(1, 1, root / "events.jsonl", best).last_seq is not None:
        pass
    seconds = time.perf_counter() - start
    grown = _peak_rss() - before
    store.close()
    print(grown, seconds)


def _peak_rss() -> int:
    """This process's peak RSS in bytes: VmHWM, which (unlike ru_maxrss) starts anew at exec."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def measure(rows: int, repeats: int) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp:
        # The daemon ingests for days: the first ingest of a process (the log's pattern
        # compiled, SQLite's statements prepared) is not its steady state.
        once(Path(tmp), min(rows, 1_000))
        runs = [once(Path(tmp), rows) for _ in range(repeats)]
        _events(Path(tmp) / "events.jsonl", 10 * rows)
        size = (Path(tmp) / "events.jsonl").stat().st_size
        bounded, whole = backlog(Path(tmp), event_log.BATCH_BYTES), backlog(Path(tmp), size)
    ours, raw, one_each = (median([r[k] for r in runs]) for k in range(3))
    # Each ingest against the raw insert right after it: this machine's speed drifts from one
    # repeat to the next, and a pair shares its moment.
    paired = median([r[0] / r[1] for r in runs])
    measured = f"metric reports/s, event log to SQLite ({rows:,} reports)"
    return [Figure("ingest", f"{measured}, median of {len(runs)}", ours, "reports/s",
                   "raw executemany of the same rows", raw, "≥ 200k rows/s", ours >= 200_000),
            Figure("ingest", f"the same, each ingest over the raw insert beside it: median of "
                   f"{len(runs)} pairs' ratios", paired, "x the raw insert's",
                   target="≥ 50% of raw", met=paired >= 0.5,
                   note=f"pairs' ratios {', '.join(f'{r[0] / r[1]:.2f}' for r in runs)}. {NOTE}"),
            Figure("ingest", measured, ours, "reports/s",
                   "raw executemany of a row per report (the store before chunks)", one_each,
                   "", None),
            Figure("ingest", f"daemon RSS growth reading a backlog of {10 * rows:,} reports "
                   f"({size / 2**20:.0f} MiB of log), in batches of "
                   f"{event_log.BATCH_BYTES / 2**20:g} MiB", bounded[0] / 1e6, "MB",
                   "the same log read in one batch (before 2026-11-27)", whole[0] / 1e6,
                   note=f"{10 * rows / bounded[1]:.3g} reports/s in batches, "
                   f"{10 * rows / whole[1]:.3g} in one")]


NOTE = ("41,600 rows/s before this issue (26,000-43,000 on this loaded machine); "
        "143,000-189,000 against raw 293,000-351,000 (0.46-0.54x) after the first changes "
        "(batched statements straight to sqlite3); 205,000 against raw 354,000 (0.58x) in "
        "the full run of 15:15 on 2026-11-25 (93f7c61), since a batch builds an Event only "
        "for what the feed reads (validations and non-metric events), not for each of its "
        "100,000 reports, and the best validation is found in the report's text instead of "
        "decoding it. CPU per 100,000 rows now: insert ~0.19 s, the regular expression "
        "over all lines 0.10 s, commit 0.045 s, the rest of reading the log ~0.06 s. Since "
        "2026-11-26 (schema 6) the training reports of a flush are one chunk line and one row "
        "(here the 9 between two validations): 294,000-361,000 reports/s, 1.0-1.2x SQLite's "
        "raw insert of a row per report, but ~0.3x its insert of the same chunk rows, which "
        "skips reading and checking the 100,000 reports' text (the regular expression alone "
        "~0.05 s) and the 10,000 validations, each an event the feed reads. Since 2026-11-27 "
        "a writer's chunk of plain numbers is signed (CRC-32) and read without the pattern's "
        "value-by-value check, and its steps are not parsed to find that they rise: 3.0e5 "
        "reports/s, 0.27x the same chunk rows, 1.14x a row per report (82eb5a3). Then a signed "
        "line's values are not counted either, a row of one line keeps the line's text, rows "
        "of lines that join no other are made in bulk, and the best validation is found by "
        "one search of all the validations' text: 0.28-0.29x -> 0.32-0.38x alternated "
        "(a263743), 0.39x in the full run of 09:16 on 2026-11-27. What is left (py-spy over "
        "20 s of repeated ingests): SQLite's insert 33% and commit 12%, about the raw "
        "baseline's whole time (ours also checks each row's foreign key, which the raw "
        "table's connection does not: ~13% of an insert, measured apart); reading the log 34% "
        "(the regular expression's split 15%, the CRCs 4%); the store's Python 11%. Then "
        "(de110d1) a log is read in batches of 2 MiB, whose columns stay in the CPU's caches "
        "(and a backlog no longer costs the daemon memory in proportion to the log: the row "
        "below), the trial's best validation is read and written without loading the trial "
        "through the ORM, the validations' events are made only for a searcher that reads "
        "them, and a flush's shared time is parsed once: 0.51-0.52x in three runs of bench/run "
        "ingest (per 100,000 reports: reading 59 ms, of which the pattern 31; store_metrics "
        "19; insert 55; commit 20; the raw baseline 83). Tried on 2026-11-27 and "
        "left: SQLite parsing the lines itself (one INSERT ... SELECT of json_extract over "
        "json_each of the batch, no checks, no ordinals) took 235 ms against our 194 ms and "
        "raw 83 ms (medians of 5); the CRC checks a column at a time instead of a loop, "
        "0.40x against 0.40x in four alternated pairs. Tried on 2026-11-27 and left: "
        "msgspec (a C JSON decoder) reading the batch, a line at a time into a typed struct "
        "whose metrics stay raw text, in place of the pattern: the decoding itself takes "
        "~15 ms of the pattern's ~35 ms, but taking each field's column out of 20,000 "
        "structs, the texts out of their raw bytes and the CRCs of the signed lines costs "
        "the rest back: 71-79 ms against 86 ms for the whole read, 213-219 ms against "
        "222-224 ms for the whole ingest (medians of 5, with the raw insert at 85 ms), "
        "not worth a second reader and a dependency. Since 2026-11-28 the raw insert's "
        "connection checks foreign keys as the store's does (each row's trial looked up), "
        "and the target is judged on the median of the pairs' ratios (each ingest against the "
        "raw insert right after it), as the ratio of the medians of 5 moved 0.41-0.57x "
        "between runs of this bench on a quiet machine")


if __name__ == "__main__":
    from bench.figures import table

    if sys.argv[1:2] == ["--backlog"]:
        _backlog_child(Path(sys.argv[2]), int(sys.argv[3]))
        sys.exit()
    print(table(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000,
                        int(sys.argv[2]) if len(sys.argv) > 2 else 3)))
