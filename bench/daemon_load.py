"""What the daemon costs the login node and the scheduler while many trials live.

Usage: ``python -m bench.daemon_load [SECONDS]`` (default 60), on a host whose ``sbatch``
reaches a Slurm cluster (``scripts/slurm-test-cluster.sh start`` makes one).

For each size N (10, 100, 500 and 1,000 trials), a fresh state directory and the real daemon:
a random search of N trials is created and submitted as one job array, held
(``slurm.sbatch_args: [--hold]``) so that every task stays live without occupying the two test
nodes. A simulator then plays N trials: each run's ``events.jsonl`` gets what the Core API
writes, through the trial side's own ``EventWriter`` — 10 training-metrics reports per second
per trial, 4 metrics each, written when a trial's writer writes them (``EventWriter.due``);
and at the largest size once more with one report of 10 metrics a second per trial (the
issue's "10 metrics/s" read literally). Over SECONDS the daemon's
CPU time (utime + stime of /proc/PID/stat) and RSS are read, and every scheduler command it
runs is counted by shims in front of the real executables. At the end the store must hold
every report once; the CPU share counts all the daemon spent until it does (the reports
written after its last sweep in the window are stored at its next), over SECONDS.

Figures: the CPU share of a daemon with no experiment at all; RSS and CPU share at 1,000
trials [≤ 150 MB, ≤ 2% of a core], their growth from 10 to 1,000; scheduler commands per
minute and per poll with 500 live jobs [O(1) per tick: the same as with 10; tick ≥ 5 s]; and
the same with the PBS double (``tests/doubles/pbs``), whose commands are real executables too.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.figures import Figure, table
from bench.sandbox import Sandbox
from hpcdet.daemon.loop import MAX_SWEEP_SECONDS
from hpcdet.paths import StatePaths
from hpcdet.rundir.event_writer import EventWriter
from hpcdet.rundir.layout import EVENTS_FILE

CONFIG = """\
name: bench-load-{trials}
entrypoint: python3 -c "import time; time.sleep(600)"
hyperparameters:
  lr: {{type: log, base: 10, minval: -4, maxval: -1}}
searcher: {{name: random, metric: loss, max_trials: {trials}, max_concurrent_trials: {trials},
           max_length: 1}}
max_restarts: 0
{hold}
"""
HOLD = {"slurm": "slurm: {sbatch_args: [--hold]}", "pbs": "pbs: {pbsbatch_args: [-h]}"}
REPORTS_PER_SECOND = 10
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
DAY_MINUTES = 24 * 60


@dataclass(frozen=True)
class Load:
    trials: int
    seconds: float
    cpu_share: float  # of one core
    rss_mb: float
    calls: int
    polls: int
    reports: int
    stored: int


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def _play(writers: list[EventWriter], seconds: float, per_second: float, metrics: int) -> int:
    """Reports as N trials make them for ``seconds``; each writer's buffer written as its
    background thread would (``EventWriter.due``, looked at once a second)."""
    start = time.monotonic()
    step = 0
    next_flush = [start + (i / len(writers)) for i in range(len(writers))]
    extra = {f"metric_{k}": 0.25 * k for k in range(max(0, metrics - 4))}
    while (now := time.monotonic()) - start < seconds:
        step += 1
        for i, writer in enumerate(writers):
            writer.emit("metrics", {"group": "training", "steps_completed": step, "metrics": {
                "loss": 1.0 / step, "accuracy": 0.5, "lr": 1e-3, "epoch": step // 100, **extra}})
            if now >= next_flush[i]:  # the writer's thread: its interval, its policy
                if writer.due(now):
                    writer.flush()
                next_flush[i] += writer.interval
        time.sleep(max(0.0, start + step / per_second - time.monotonic()))
    for writer in writers:
        writer.flush()
    return step * len(writers)


def one(root: Path, backend: str, trials: int, seconds: float,
        per_second: float = REPORTS_PER_SECOND, metrics: int = 4) -> Load:
    box = Sandbox(root, backend, count_calls=True)
    with box.daemon():
        exp_id = box.create(CONFIG.format(trials=trials, hold=HOLD[backend]))
        box.wait_submitted(exp_id, trials)
        store = box.store()
        paths = StatePaths(box.state)
        writers = []
        for run in store.runs(trial_ids=[t.id for t in store.trials(exp_id)]):
            run_dir = paths.run(exp_id, run.trial_id, run.run_id)
            run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            writers.append(EventWriter(run_dir / EVENTS_FILE))
        pid = box.daemon_pid()
        time.sleep(2.0)  # past the submission's own commands
        calls0, polls0 = sum(box.calls().values()), box.daemon_polls()
        cpu0, t0 = _cpu_seconds(pid), time.monotonic()
        reports = _play(writers, seconds, per_second, metrics)
        t1 = time.monotonic()
        calls1, polls1 = sum(box.calls().values()), box.daemon_polls()
        rss = _rss_mb(pid)
        # The reports written since the daemon's last sweep are stored at its next: what that
        # costs is the load's too (up to a sweep's spacing after the load ends).
        deadline = time.monotonic() + MAX_SWEEP_SECONDS + 30
        while (stored := sum(len(store.metrics(t.id)) for t in store.trials(exp_id))) < reports:
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        cpu1, rss = _cpu_seconds(pid), max(rss, _rss_mb(pid))
        store.close()
        box.cli("experiment", "kill", str(exp_id))
    return Load(trials, t1 - t0, (cpu1 - cpu0) / (t1 - t0), rss, calls1 - calls0,
                polls1 - polls0, reports, stored)


def idle(root: Path, seconds: float) -> float:
    """The daemon's share of a core with no experiment at all, over ``seconds``."""
    box = Sandbox(root, "slurm")
    with box.daemon():
        pid = box.daemon_pid()
        time.sleep(2.0)  # past its start
        cpu0, t0 = _cpu_seconds(pid), time.monotonic()
        time.sleep(seconds)
        return (_cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)


def _check(load: Load) -> None:
    if load.stored != load.reports:
        raise RuntimeError(f"{load.trials} trials: the store holds {load.stored} of "
                           f"{load.reports} reports")


def _ps_time(share: float) -> str:
    """A day at ``share`` of a core, as `ps` prints a process's cumulative CPU time."""
    seconds = round(share * 86400)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def measure(seconds: float, sizes: tuple[int, ...] = (10, 100, 500, 1000),
            pbs_size: int = 500, quiet_size: int = 100) -> list[Figure]:
    loads: dict[int, Load] = {}
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp:
        idle_share = idle(Path(tmp) / "idle", seconds)
        print(f"  slurm, no experiment: {100 * idle_share:.3f}% of a core", flush=True)
        for n in sizes:
            loads[n] = one(Path(tmp) / f"slurm-{n}", "slurm", n, seconds)
            _check(loads[n])
            print(f"  slurm, {n} trials: {loads[n]}", flush=True)
        calm = one(Path(tmp) / "calm", "slurm", sizes[-1], seconds, per_second=1, metrics=10)
        _check(calm)
        print(f"  slurm, {sizes[-1]} trials, one report of 10 metrics a second: {calm}",
              flush=True)
        pbs = one(Path(tmp) / "pbs", "pbs", pbs_size, seconds)
        _check(pbs)
        print(f"  pbs, {pbs_size} trials: {pbs}", flush=True)
        quiet = one(Path(tmp) / "quiet", "slurm", quiet_size, seconds, per_second=1)
        _check(quiet)
        print(f"  slurm, {quiet_size} trials, one report a second each: {quiet}", flush=True)
    small, big = loads[sizes[0]], loads[sizes[-1]]
    mid = loads[500] if 500 in loads else big
    figures = [Figure(
        "daemon_load", "daemon CPU, no experiment (idle)", 100 * idle_share, "% of a core",
        f"the same, {small.trials} live trials", 100 * small.cpu_share, "", None,
        note=IDLE_NOTE)]
    # What a login node's reaper counts (issue 42): the CPU time `ps` shows after a day.
    figures.append(Figure(
        "daemon_load", "daemon CPU a day, no experiment (idle)", DAY_MINUTES * idle_share,
        "CPU-minutes/day", f"the same, {quiet.trials} live trials reporting once a second",
        DAY_MINUTES * quiet.cpu_share, "≤ 1 CPU-minute/day",
        DAY_MINUTES * idle_share <= 1, note=f"`ps` TIME after 24 h: {_ps_time(idle_share)}"))
    figures.append(Figure(
        "daemon_load", f"daemon CPU a day, {quiet.trials} live trials reporting once a second "
        f"({quiet.reports / quiet.seconds:,.0f} reports/s in all)",
        DAY_MINUTES * quiet.cpu_share, "CPU-minutes/day",
        f"the same, {small.trials} trials at {REPORTS_PER_SECOND} reports/s",
        DAY_MINUTES * small.cpu_share, "≤ 5 CPU-minutes/day",
        DAY_MINUTES * quiet.cpu_share <= 5,
        note=f"`ps` TIME after 24 h: {_ps_time(quiet.cpu_share)}; {QUIET_NOTE}"))
    for n in sizes:
        load = loads[n]
        figures.append(Figure(
            "daemon_load", f"daemon CPU, {n:,} live trials, {load.reports / load.seconds:,.0f} "
            f"reports/s in all (each trial {REPORTS_PER_SECOND}/s asked)",
            100 * load.cpu_share, "% of a core", f"the same, {small.trials} trials",
            100 * small.cpu_share, "≤ 2% of a core" if n == big.trials else "",
            load.cpu_share <= 0.02 if n == big.trials else None,
            note=CPU_NOTE if n == big.trials else ""))
    figures.append(Figure(
        "daemon_load", f"daemon CPU, {calm.trials:,} live trials, one report of 10 metrics a "
        f"second each ({calm.reports / calm.seconds:,.0f} reports/s in all)",
        100 * calm.cpu_share, "% of a core", f"the same, {small.trials} trials at 10 reports/s",
        100 * small.cpu_share, "≤ 2% of a core", calm.cpu_share <= 0.02, note=CALM_NOTE))
    for n in sizes:
        load = loads[n]
        figures.append(Figure(
            "daemon_load", f"daemon RSS, {n:,} live trials", load.rss_mb, "MB",
            f"the same, {small.trials} trials", small.rss_mb,
            "≤ 150 MB" if n == big.trials else "", load.rss_mb <= 150 if n == big.trials else None))
    for name, load, base in (("Slurm", mid, small), ("PBS double", pbs, None)):
        per_poll = load.calls / max(1, load.polls)
        figures.append(Figure(
            "daemon_load", f"{name}: scheduler commands per poll, {load.trials} live jobs",
            per_poll, "calls", f"the same, {base.trials} live jobs" if base else "",
            base.calls / max(1, base.polls) if base else None, "O(1) per tick",
            per_poll <= 3 and (base is None or load.calls <= base.calls + 2)))
        figures.append(Figure(
            "daemon_load", f"{name}: scheduler commands per minute, {load.trials} live jobs",
            60 * load.calls / load.seconds, "calls/min", "", None,
            "tick ≥ 5 s", load.polls <= load.seconds / 5 + 1))
    return figures


QUIET_NOTE = (
    "issue 42's budget: BU's reaper kills a login-node process past 15 CPU-minutes, NJIT's "
    "past 1, OSC's past 20")
IDLE_NOTE = (
    "0.43% before 2026-11-26 (a sweep every second: the experiments queried five times, the "
    "status file written and forced to disk, the run bell's directory read four times a "
    "second); since fc51155 a daemon with no unfinished experiment and no live run ticks "
    "every 10 s and leaves the bell alone; a CLI on its host rings it awake at once, and since "
    "09be754 requests from other login nodes are looked for every second, not every 0.25 s")
CPU_NOTE = (
    "84% of a core at 23fb272 (2026-11-25), 12.9% at 93f7c61, 7.07% at 0e12b3e (the bell: a "
    "tick reads only the runs that rang; a sweep of every run as often as keeps it to 0.5% of "
    "the time, every 10 s at 1,000 runs), 5.76% at 50c1c17, 2.57% at fac0ba2 (schema 6: a "
    "flush's training reports are one chunk line, a run's chunk lines of a sweep one row). "
    "Since 5dc1c87..25ec122 (2026-11-26): a trial's writer holds what only a sweep reads up "
    "to 5 s (a fifth of the lines; what the daemon decides on still goes within a second); "
    "polls are spaced to keep their CPU to 0.15% of a core (every ~10 s at 1,000 live jobs, "
    "not 5 s); whether the daemon is idle is asked on sweeps, not every tick (~1.4 ms); a "
    "batch's chunk lines are checked a column at a time: 0.76x the CPU of b5e7a93 in 60 s "
    "runs alternated on 2026-11-27 (2.64, 2.73% against 3.48, 3.56%). This machine's speed "
    "drifts: the same code gave 2.06-2.32% at 23:41 and 2.69-2.95% an hour later, so only "
    "the alternated ratio is firm (2.21% at dae03f2, in an hour when report_metrics took "
    "2.49 us against 4.36 us at a90d0e1). On 2026-11-27 (25ed44f..c8b11d9): this bench "
    "counts what the daemon spends storing the reports written after its last sweep in the "
    "window (before, it did not: up to a sweep's worth under-counted); a trial's writer "
    "signs a chunk of plain numbers with a CRC-32 and the daemon takes a signed chunk whose "
    "CRC matches without the value-by-value pattern (the pattern's split of a sweep's lines "
    "49 -> 4 ms in-process); sweeps at most 30 s apart, not 10 (a sweep of 1,000 runs costs "
    "~0.1 s plus ~1 us a report, and SWEEP_SHARE asked for ~25 s). 60 s runs alternated with "
    "b2830be, both counted the new way: 1.69, 2.07, 2.02% against 2.95, 2.69, 2.92% (0.69x; "
    "the signature alone: 2.01, 2.31, 2.21% against 2.67, 2.45, 2.60%, counted the old way). "
    "What is left (process time by phase, 100 s): storing the logs 68% (~0.3 s a sweep of "
    "250,000 reports, ~1.2 us a report; SQLite's insert and commit about a third of that), "
    "polls 8% (POLL_SHARE), the rest of the ticks ~24%. Next suspects: the steps parsed to "
    "ints to find that they rise, which a signed chunk already promises; the columns split "
    "to join a run's lines of a sweep into one row")
CALM_NOTE = (
    "9.3% at f9b3be0, 6.3% at 93f7c61 (per-run work every tick: a stat, open, read and "
    "parse of each log, an exit check and a control-file comparison, ~60 us a run a second); "
    "2.0-2.4% in 30 s runs on 2026-11-26 since a tick looks only at runs that rang the bell "
    "(a validation, a completed operation, a checkpoint, an exit) and sweeps every run as "
    "often as keeps sweeping to 0.5% of the time; squeue's lines are parsed once per distinct "
    "line: 2.25% at 0e12b3e. Since 5c6f821 submission and the experiments' final states are "
    "looked at only after a sweep, a ring, a poll or a decision, and between sweeps a poll's "
    "answer is checked only for the runs it says ended: 1.67-1.97% against 2.27-2.30% in 30 s "
    "runs alternated with the parent commit, 1.8% in the full run at 90a1a4f. py-spy: reading "
    "and storing the 1,000 rows a second is half of what is left. The price: at 1,000 live "
    "runs training metrics reach the database every 10 s (~25 s since c8b11d9), not every "
    "second; decisions do not "
    "wait for the sweep. 1.51% against 1.82% in 60 s runs at b7b8014, where a trial's writer "
    "holds training reports up to 5 s: five reports a chunk line, not a line each")


if __name__ == "__main__":
    print(table(measure(float(sys.argv[1]) if len(sys.argv) > 1 else 60)))
