"""End-to-end scenarios, run on every backend (local here, real Slurm in tests/cluster)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from hpcdet import __version__
from hpcdet.rundir.events import read_events
from tests.support import EXAMPLES, FIXTURES, Hpcdet, copy_examples


def stage0(h: Hpcdet, tmp: Path) -> None:
    ctx = copy_examples(tmp / "ctx")
    out = h.run("experiment", "create", str(ctx / "0_start.yaml"), str(ctx), "-f").stdout
    assert "Created experiment 1" in out
    assert "x is now 100" in out
    assert "Trial 1 ended as COMPLETED" in out
    assert h.describe(1)["experiment"]["state"] == "COMPLETED"


def stage1(h: Hpcdet, tmp: Path) -> None:
    ctx = copy_examples(tmp / "ctx")
    exp = h.create(ctx / "1_metrics.yaml", ctx, "-f")
    assert h.describe(exp)["experiment"]["state"] == "COMPLETED"
    trial = h.describe(exp)["trials"][0]["id"]
    rows = h.metrics(trial)
    training = [(r["steps_completed"], r["metrics"]) for r in rows if r["group"] == "training"]
    validation = [(r["steps_completed"], r["metrics"]) for r in rows if r["group"] == "validation"]
    assert training == [(s, {"x": s}) for s in range(10, 101, 10)]
    assert validation == [(100, {"x": 100})]
    logs = h.run("trial", "logs", str(trial)).stdout
    assert "INFO: [" in logs and "x is now 100" in logs  # det.LOG_FORMAT
    table = h.run("trial", "metrics", str(trial)).stdout
    assert "validation" in table and "training" in table


def stage2(h: Hpcdet, tmp: Path) -> None:
    ctx = copy_examples(tmp / "ctx")
    exp = h.create(ctx / "2_checkpoints.yaml", ctx, "-f")
    d = h.describe(exp)
    assert d["experiment"]["state"] == "COMPLETED"
    trial = d["trials"][0]
    assert trial["steps_completed"] == 100
    # The trial reported a checkpoint every 10 steps, each a directory with `state` and
    # metadata.json ...
    events = h.state / "runs" / f"exp-{exp}" / "trials" / str(trial["id"]) / "run-1"
    reported = [json.loads(line) for line in (events / "events.jsonl").read_text().splitlines()]
    ckpts = [e for e in reported if e["type"] == "checkpoint"]
    assert [c["steps_completed"] for c in ckpts] == list(range(10, 101, 10))
    assert all(set(c["resources"]) == {"state", "metadata.json"} for c in ckpts)
    # ... and the default GC policy (save_trial_best 1, save_trial_latest 1) kept the last.
    listing = h.run("checkpoint", "list", str(exp)).stdout
    assert listing.count("COMPLETED") == 1 and trial["latest_checkpoint"] in listing
    dirs = [p for p in (h.state / "checkpoints").iterdir() if p.is_dir()]
    assert [p.name for p in dirs] == [trial["latest_checkpoint"]]
    meta = json.loads((dirs[0] / "metadata.json").read_text())
    assert meta == {"steps_completed": 100}
    x, step, tid = (int(v) for v in (dirs[0] / "state").read_text().split(","))
    assert (x, step, tid) == (100, 100, trial["id"])


def _environment(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    except OSError:  # ended meanwhile
        return ""


def _first_checkpoint_seen(h: Hpcdet, exp: int) -> bool:
    trial = h.describe(exp)["trials"]
    return bool(trial) and trial[0]["latest_checkpoint"] is not None


def pause_activate(h: Hpcdet, tmp: Path) -> None:
    ctx = copy_examples(tmp / "ctx")
    (ctx / "slow.yaml").write_text(
        (ctx / "2_checkpoints.yaml").read_text().replace("core-api-stage-2", "pausing")
    )
    # The first run takes 100 s, so that the pause lands mid-run however late the daemon
    # sees the first checkpoint on a loaded machine; the resumed run takes the usual 10 s.
    script = ctx / "2_checkpoints.py"
    script.write_text(script.read_text().replace(
        "time.sleep(0.1)", "time.sleep(0.1 if latest_checkpoint else 1.0)"))
    exp = h.create(ctx / "slow.yaml", ctx)
    h.wait_for("a first checkpoint", lambda: _first_checkpoint_seen(h, exp))
    assert "Paused experiment" in h.run("experiment", "pause", str(exp)).stdout
    d = h.wait_state(exp, {"PAUSED"})
    h.wait_for("the trial to pause", lambda: h.describe(exp)["trials"][0]["state"] == "PAUSED")
    paused_at = h.describe(exp)["trials"][0]["steps_completed"]
    assert 10 <= paused_at < 100, paused_at
    # Trials run the snapshot taken at create: breaking the user's copy changes nothing.
    (ctx / "2_checkpoints.py").write_text("raise SystemExit('the edited script ran')\n")
    assert "Activated experiment" in h.run("experiment", "activate", str(exp)).stdout
    d = h.wait_state(exp, {"COMPLETED", "ERROR"})
    assert d["experiment"]["state"] == "COMPLETED", d
    runs = list(d["runs"])
    assert len(runs) == 2, runs
    trial = d["trials"][0]["id"]
    rows = h.metrics(trial)
    second = [r for r in rows if r["run_id"] == 2 and r["group"] == "training"]
    assert second and second[0]["steps_completed"] == paused_at + 10
    validation = [r for r in rows if r["group"] == "validation"]
    assert validation[-1]["metrics"] == {"x": 100}  # the same final x as an uninterrupted run
    training = [r["steps_completed"] for r in rows if r["group"] == "training"]
    assert training == list(range(10, 101, 10))


def bad_config(h: Hpcdet, tmp: Path) -> None:
    cfg = tmp / "bad.yaml"
    cfg.write_text(
        "name: broken\nentrypoint: python3 x.py\nsearcher:\n  name: single\n  metirc: x\n"
        "resources:\n  slots_per_trail: 2\nmax_restarts: -1\nhyperparameters:\n"
        "  lr: {type: double, minval: 1, maxval: 0.1}\n"
    )
    (tmp / "ctx").mkdir()
    p = h.run("experiment", "create", str(cfg), str(tmp / "ctx"), check=False)
    assert p.returncode == 1
    text = p.stdout + p.stderr
    assert "Traceback" not in text
    for path in ("searcher.metirc", "resources.slots_per_trail", "max_restarts",
                 "hyperparameters.lr"):
        assert path in text, (path, text)
    assert "did you mean" in text
    assert not (h.state / "runs").exists() or not any((h.state / "runs").iterdir())


def hostile_values(h: Hpcdet, tmp: Path) -> None:
    marker = tmp / "owned"
    ctx = tmp / "ctx"
    ctx.mkdir()
    (ctx / "show.py").write_text(
        "import determined as det\n"
        "info = det.get_cluster_info()\n"
        "print('HP', repr(info.trial.hparams['cmd']))\n"
    )
    evil = f"[/oops] $(touch {marker}) `touch {marker}` '\"; touch {marker}\ntouch {marker}"
    cfg = tmp / "evil.yaml"
    cfg.write_text(
        f"name: {json.dumps(evil)}\nentrypoint: python3 show.py\n"
        f"hyperparameters:\n  cmd: {json.dumps(evil)}\n"
        "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n"
        f"environment:\n  environment_variables:\n    - {json.dumps('EVIL=' + evil)}\n"
    )
    out = h.run("experiment", "create", str(cfg), str(ctx), "-f").stdout
    assert f"HP {evil!r}" in out
    assert not marker.exists()
    assert "[/oops] $(touch" in h.run("experiment", "list").stdout  # text, not rich markup
    listing = h.run("experiment", "list", "--csv").stdout
    assert next(csv.reader(io.StringIO(listing.splitlines()[1])))[2] == evil.replace("\n", "\\n")


def metrics_survive_daemon_kills(h: Hpcdet, tmp: Path, kills: int = 4) -> None:
    ctx = tmp / "ctx"
    ctx.mkdir()
    (ctx / "many.py").write_text((FIXTURES / "many_metrics.py").read_text())
    cfg = tmp / "many.yaml"
    cfg.write_text(
        "name: many-metrics\nentrypoint: python3 many.py\n"
        "searcher: {name: single, metric: loss, max_length: 1}\nmax_restarts: 0\n"
    )
    exp = h.create(cfg, ctx)
    for _ in range(kills):
        time.sleep(1.5)
        h.kill_daemon()
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=300)
    assert d["experiment"]["state"] == "COMPLETED", d
    trial = d["trials"][0]["id"]
    rows = h.metrics(trial)
    got = sorted((r["group"], r["steps_completed"], json.dumps(r["metrics"])) for r in rows)
    events = h.state / "runs" / f"exp-{exp}" / "trials" / str(trial) / "run-1" / "events.jsonl"
    reported = [(ev.body["group"], ev.body["steps_completed"], json.dumps(ev.body["metrics"]))
                for ev in read_events(events, 0) if ev.type == "metrics"]  # chunks too
    assert len(reported) == 600
    assert got == sorted(reported)


def _snapshot(h: Hpcdet, exp: int) -> dict[str, object]:
    d = h.describe(exp)
    keep = ("id", "state", "steps_completed", "latest_checkpoint", "best_validation", "restarts",
            "hparams_json", "trial_seed")
    trials = [{k: t[k] for k in keep} for t in d["trials"]]
    return {
        "experiment": {k: d["experiment"][k] for k in ("id", "name", "state", "searcher")},
        "trials": trials,
        "metrics": [h.metrics(t["id"]) for t in trials],
        "checkpoints": h.run("checkpoint", "list", str(exp)).stdout,
    }


def rebuild_on_network_fs(h: Hpcdet, tmp: Path) -> None:
    local = tmp / "local-disk"
    h.extra_env.update(HPCDET_FSTYPE="nfs4", HPCDET_LOCAL_DIR=str(local))
    ctx = copy_examples(tmp / "ctx")
    exp1 = h.create(ctx / "2_checkpoints.yaml", ctx, "-f")
    exp2 = h.create(ctx / "1_metrics.yaml", ctx, "-f")
    status = h.run("daemon", "status").stdout
    assert "nfs4" in status and "local disk" in status and str(local) in status, status
    assert f"hpcdet {__version__}" in status and "note:" not in status, status
    dbs = list(local.rglob("hpcdet.db"))
    assert len(dbs) == 1 and not (h.state / "hpcdet.db").exists()
    before = [_snapshot(h, exp1), _snapshot(h, exp2)]
    h.stop()
    for f in dbs[0].parent.glob("hpcdet.db*"):
        f.unlink(missing_ok=True)  # the -wal and -shm go with the daemon's last connection
    h.run("daemon", "start")
    after = [_snapshot(h, exp1), _snapshot(h, exp2)]
    assert after == before
    # New ids continue after the rebuilt ones.
    assert h.create(ctx / "0_start.yaml", ctx, "-f") == 3


def one_status_query_per_tick(h: Hpcdet, tmp: Path, experiments: int = 4,
                              query: str = "squeue", submit: str = "sbatch",
                              hosts: frozenset[str] = frozenset({"node1", "node2"})) -> None:
    ctx = tmp / "ctx"
    ctx.mkdir()
    # The jobs live until the test has seen its polls: polls come 5 s apart, and as far apart
    # as keeps their CPU to POLL_SHARE (up to a minute under load).
    release = tmp / "release"
    (ctx / "sleep.py").write_text(
        "import os, time\n"
        f"for _ in range(600):\n    if os.path.exists({str(release)!r}):\n        break\n"
        "    time.sleep(0.5)\n")
    cfg = tmp / "sleep.yaml"
    cfg.write_text("name: sleeper\nentrypoint: python3 sleep.py\n"
                   "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n")
    ids = [h.create(cfg, ctx) for _ in range(experiments)]
    h.wait_for("all jobs running",
               lambda: sum(len(h.daemon_status().get("live_jobs", [])) for _ in [0])
               == experiments, timeout=60)
    polls = h.daemon_status()["polls"]
    h.wait_for("two more polls", lambda: h.daemon_status()["polls"] >= polls + 2, timeout=200)
    release.touch()
    st = h.daemon_status()
    calls = st["scheduler_calls"]
    assert calls.get(query, 0) == st["polls"], st
    assert calls.get(submit, 0) == experiments
    for exp in ids:
        assert h.wait_state(exp, {"COMPLETED", "ERROR"})["experiment"]["state"] == "COMPLETED"
    nodes = set()
    for info in h.state.glob("runs/exp-*/trials/*/run-1/nodes/0.json"):
        nodes.add(json.loads(info.read_text())["agent_id"])
    assert nodes <= hosts and nodes, nodes  # the scheduler's names for its nodes


def startup_hook_and_list_entrypoint(h: Hpcdet, tmp: Path) -> None:
    ctx = tmp / "ctx"
    ctx.mkdir()
    (ctx / "startup-hook.sh").write_text("export FROM_HOOK=hooked\n")
    (ctx / "show.py").write_text(
        "import os, sys\nprint('hook:', os.environ.get('FROM_HOOK'), 'args:', sys.argv[1:])\n"
    )
    cfg = tmp / "list.yaml"
    cfg.write_text(
        "name: list-entrypoint\nentrypoint: [python3, show.py, 'a b', '$(x)']\n"
        "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n"
    )
    out = h.run("experiment", "create", str(cfg), str(ctx), "-f").stdout
    assert "hook: hooked args: ['a b', '$(x)']" in out


def startup_hooks_run_in_bash_and_stop_at_a_failure(h: Hpcdet, tmp: Path) -> None:
    """startup-hook.sh runs in bash with set -e, as in Determined: bash syntax works, and a
    failing command stops the hook and the trial, which ends with the hook's exit code."""
    ctx = tmp / "ctx"
    ctx.mkdir()
    (ctx / "run.py").write_text("import os\nprint('entrypoint ran', os.environ['FROM_HOOK'])\n")
    (ctx / "startup-hook.sh").write_text(
        'if [[ -n "${HOME:-}" ]]; then export FROM_HOOK=bash; fi\n')
    cfg = tmp / "hook.yaml"
    cfg.write_text("name: hook\nentrypoint: python3 run.py\nmax_restarts: 0\n"
                   "searcher: {name: single, metric: x, max_length: 1}\n")
    out = h.run("experiment", "create", str(cfg), str(ctx), "-f").stdout
    assert "entrypoint ran bash" in out, out
    (ctx / "startup-hook.sh").write_text(
        "export FROM_HOOK=x\necho fetching the data\nfalse\necho the hook went on\n")
    exp = h.create(cfg, ctx)
    d = h.wait_state(exp, {"COMPLETED", "ERROR"})
    assert d["experiment"]["state"] == "ERROR", d
    trial = d["trials"][0]
    assert "startup-hook.sh failed with exit code 1" in trial["end_reason"], trial
    logs = h.run("trial", "logs", str(trial["id"])).stdout
    assert "fetching the data" in logs and "startup-hook.sh failed with exit code 1" in logs
    assert "the hook went on" not in logs and "entrypoint ran" not in logs, logs
    described = h.run("experiment", "describe", str(exp)).stdout
    assert "startup-hook.sh failed with exit code 1" in described, described


def kill_running_experiment(h: Hpcdet, tmp: Path) -> None:
    ctx = copy_examples(tmp / "ctx")
    exp = h.create(ctx / "2_checkpoints.yaml", ctx)
    h.wait_for("a first checkpoint", lambda: _first_checkpoint_seen(h, exp))
    start = time.monotonic()
    assert "Killed experiment" in h.run("experiment", "kill", str(exp)).stdout
    d = h.wait_state(exp, {"CANCELED"}, timeout=60)
    assert time.monotonic() - start < 30
    assert d["trials"][0]["state"] == "CANCELED"
    assert d["trials"][0]["steps_completed"] < 100
    # Unlike a preemption's SIGTERM, the kill's ends the trial at once: it dies of it (143)
    # instead of checkpointing, and nothing asks it to checkpoint.
    [run_dir] = (h.state / "runs" / f"exp-{exp}" / "trials").glob("*/run-*")
    h.wait_for("the batch script's end", lambda: (run_dir / "exit.json").exists(), timeout=30)
    assert json.loads((run_dir / "exit.json").read_text())["exit_code"] == 143
    assert (run_dir / "kill").exists() and not (run_dir / "preempt").exists()


def unreadable_run_is_its_experiments_fault(h: Hpcdet, tmp: Path) -> None:
    """Issue 37: one run's unreadable event log stalled every experiment's tick. Now the
    daemon goes on serving the others, and `daemon status` and `describe` name the fault.

    As another user (``h.user``) the run directory is made unreadable as the tester did
    (chmod 000); as root, whom modes do not stop, its event log becomes a link to itself."""
    ctx = tmp / "ctx"
    ctx.mkdir(mode=0o755)
    (ctx / "sleep.py").write_text("import time\ntime.sleep(300)\n")
    cfg = ctx / "sleep.yaml"
    cfg.write_text("name: sleeper\nentrypoint: python3 sleep.py\n"
                   "searcher: {name: single, metric: x, max_length: 1}\n")
    bad = h.create(cfg, ctx)
    run_dir = h.state / "runs" / f"exp-{bad}" / "trials" / "1" / "run-1"
    h.wait_for("the sleeper to start", lambda: (run_dir / "nodes").is_dir())
    events = run_dir / "events.jsonl"
    kept = run_dir / "events.jsonl.kept"
    if h.user is not None:
        run_dir.chmod(0)
        why = "Permission denied"
    else:
        if events.exists():
            events.rename(kept)
        events.symlink_to(events.name)  # ELOOP for every reader
        why = "Too many levels of symbolic links"
    examples = copy_examples(tmp / "ex")
    examples.chmod(0o755)
    good = h.create(examples / "0_start.yaml", examples)
    h.wait_state(good, {"COMPLETED"}, timeout=90)

    def fault_shown() -> bool:
        status = h.run("daemon", "status").stdout
        return f"fault: experiment {bad}: reading an event log of run 1.1" in status

    # Event logs are read at sweeps, which come up to MAX_SWEEP_SECONDS (60 s) apart.
    h.wait_for("the fault in `daemon status`", fault_shown, timeout=90)
    status = h.run("daemon", "status").stdout
    assert why in status and str(events) in status, status
    assert time.time() - h.daemon_status()["last_tick"] < 15  # the loop goes on
    described = h.run("experiment", "describe", str(bad)).stdout
    assert "fault: reading an event log of run 1.1" in described, described
    assert str(events) in described, described
    [fault] = h.describe(bad)["faults"]
    assert (fault["step"], fault["path"]) == ("reading an event log", str(events)), fault
    assert h.describe(good)["faults"] == []
    assert h.describe(bad)["experiment"]["state"] == "ACTIVE"  # retried: it has not lasted
    # Readable again: the fault passes and the experiment goes on (here, to its kill).
    if h.user is not None:
        run_dir.chmod(0o700)
    else:
        events.unlink()
        if kept.exists():
            kept.rename(events)
    h.wait_for("the fault to pass", lambda: not h.describe(bad)["faults"], timeout=90)
    assert "fault:" not in h.run("daemon", "status").stdout
    h.run("experiment", "kill", str(bad))
    h.wait_state(bad, {"CANCELED"}, timeout=60)


def failing_trial_restarts(h: Hpcdet, tmp: Path) -> None:
    ctx = tmp / "ctx"
    ctx.mkdir()
    (ctx / "fail.py").write_text("import sys\nprint('failing')\nsys.exit(3)\n")
    cfg = tmp / "fail.yaml"
    cfg.write_text("name: failing\nentrypoint: python3 fail.py\n"
                   "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 2\n")
    p = h.run("experiment", "create", str(cfg), str(ctx), "-f", check=False)
    assert p.returncode == 1
    # -f ends with the trial; the experiment ends in a later pass of the daemon.
    d = h.wait_state(1, {"COMPLETED", "ERROR", "CANCELED"}, timeout=60)
    assert d["experiment"]["state"] == "ERROR"
    runs = [(r["run_id"], r["exit_code"], r["state"], r["outcome"]) for r in d["runs"]]
    assert len(runs) == 3 and {code for _, code, _, _ in runs} == {3}, runs
    assert "max_restarts (2) used up" in d["trials"][0]["end_reason"]


# ---- hyperparameter search (issue 3) ---------------------------------------------------------


def _all_trials_final(d: dict[str, object]) -> None:
    states = {t["state"] for t in d["trials"]}  # type: ignore[index]
    assert states <= {"COMPLETED"}, d["trials"]  # type: ignore[index]


def asha_v037(h: Hpcdet, tmp: Path, kill_daemon: bool = False) -> dict[str, object]:
    ctx = copy_examples(tmp / "ctx")
    exp = h.create(ctx / "3_hpsearch.yaml", ctx)
    if kill_daemon:
        for _ in range(3):
            time.sleep(4)
            h.kill_daemon()
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=600)
    assert d["experiment"]["state"] == "COMPLETED", d
    assert len(d["trials"]) == 10
    _all_trials_final(d)
    assert sorted(t["request_id"] for t in d["trials"]) == list(range(10))
    ops = [json.loads(t["ops_json"]) for t in d["trials"]]
    assert any(len(o) > 1 for o in ops), ops  # some trials were promoted
    # Brackets of 2 rungs start at 100 / 4 = 25 batches, the 1-rung bracket at 100.
    assert {o[0] for o in ops} <= {25, 100} and all(o[-1] in (25, 100) for o in ops), ops
    out = h.run("experiment", "describe", str(exp)).stdout
    assert "best trial:" in out and "closed" in out
    return d


def _stopped_below(journal: Path, batches: int) -> set[int]:
    """The trials the searcher stopped at a validation of fewer than ``batches`` batches: a
    stop is journaled with the searcher event that caused it, at the same time."""
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    fed = {(e["time"], e["event"]["request_id"]): e for e in entries
           if e["kind"] == "searcher_event" and e["event"].get("kind") == "validation"}
    return {cause["trial_id"] for e in entries if e["kind"] == "trial_stop"
            for cause in [fed.get((e["time"], e["request_id"]))]
            if cause is not None and cause["event"]["metrics"]["batches"] < batches}


def asha_v038(h: Hpcdet, tmp: Path) -> dict[str, object]:
    ctx = copy_examples(tmp / "ctx")
    exp = h.create(ctx / "3_hpsearch_v038.yaml", ctx)
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=600)
    assert d["experiment"]["state"] == "COMPLETED", d
    assert len(d["trials"]) == 10
    _all_trials_final(d)
    # ASHA stops trials below the top rung early and those reaching the top rung at 100. It
    # decides at the first validation past the 25-batch rung (30), as the journal shows; the
    # trial sees the stop at a later should_preempt() check, one report (a second) later on a
    # quiet machine, but on a loaded one (CI, 2 cores) every trial once reached 100 first.
    early = _stopped_below(h.state / "runs" / f"exp-{exp}" / "journal.jsonl", 100)
    assert early, d["trials"]
    assert early <= {t["id"] for t in d["trials"] if t["stop_requested"]}, d["trials"]
    assert all(t["steps_completed"] in range(30, 101, 10) for t in d["trials"]), d["trials"]
    out = h.run("experiment", "describe", str(exp)).stdout
    assert "stopped early" in out and "best trial:" in out
    return d


def random_throttled(h: Hpcdet, tmp: Path, trials: int = 100, concurrency: int = 4) -> None:
    ctx = tmp / "ctx"
    ctx.mkdir()
    spans = tmp / "spans"
    spans.mkdir()
    (ctx / "short.py").write_text(
        "import os, time\n"
        "import determined as det\n"
        "info = det.get_cluster_info()\n"
        "start = time.time()\n"
        "time.sleep(0.5)\n"
        "with det.core.init() as core:\n"
        "    core.train.report_validation_metrics(steps_completed=1, metrics={'loss': "
        "info.trial.hparams['lr']})\n"
        f"open(os.path.join({str(spans)!r}, str(info.trial.trial_id)), 'w')"
        ".write(f'{start} {time.time()}')\n"
    )
    cfg = tmp / "random.yaml"
    cfg.write_text(
        "name: random-throttled\nentrypoint: python3 short.py\n"
        "hyperparameters:\n  lr: {type: log, base: 10, minval: -4, maxval: -1}\n"
        f"searcher: {{name: random, metric: loss, max_trials: {trials}, "
        f"max_concurrent_trials: {concurrency}, max_length: 1}}\nmax_restarts: 0\n"
    )
    exp = h.create(cfg, ctx)
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=1200)
    assert d["experiment"]["state"] == "COMPLETED", d["experiment"]
    assert len(d["trials"]) == trials
    _all_trials_final(d)
    st = h.daemon_status()
    assert st["scheduler_calls"].get("sbatch", 0) == 1, st  # one array for all trials
    assert len(d["arrays"]) == 1
    events = []
    for f in spans.iterdir():
        a, b = (float(v) for v in f.read_text().split())
        events += [(a, 1), (b, -1)]
    running = peak = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        running += delta
        peak = max(peak, running)
    assert len(events) == 2 * trials
    assert peak <= concurrency, peak


def split_arrays(h: Hpcdet, tmp: Path, trials: int = 120) -> None:
    ctx = tmp / "ctx"
    ctx.mkdir()
    (ctx / "quick.py").write_text("print('quick')\n")
    cfg = tmp / "split.yaml"
    cfg.write_text(
        "name: split\nentrypoint: python3 quick.py\n"
        "hyperparameters:\n  a: {type: int, minval: 1, maxval: 100}\n"
        f"searcher: {{name: random, metric: loss, max_trials: {trials}, "
        "max_concurrent_trials: 8, max_length: 1}\nmax_restarts: 0\n"
    )
    exp = h.create(cfg, ctx)
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=1200)
    assert d["experiment"]["state"] == "COMPLETED", d["experiment"]
    assert len(d["trials"]) == trials
    assert [(a["offset"], a["count"]) for a in d["arrays"]] == [(0, 50), (50, 50), (100, 20)]


def checkpoint_gc(h: Hpcdet, tmp: Path) -> None:
    ctx = copy_examples(tmp / "ctx")
    (ctx / "keep2.yaml").write_text(
        (ctx / "2_checkpoints.yaml").read_text()
        + "checkpoint_storage:\n  type: shared_fs\n"
        f"  host_path: {tmp / 'ckpts'}\n  save_trial_latest: 2\n  save_trial_best: 0\n"
    )
    exp = h.create(ctx / "keep2.yaml", ctx, "-f")
    d = h.wait_state(exp, {"COMPLETED"})
    h.wait_for("garbage collection", lambda: len(list((tmp / "ckpts").iterdir())) == 2)
    listing = h.run("checkpoint", "list", str(exp)).stdout
    kept = sorted(p.name for p in (tmp / "ckpts").iterdir())
    for uuid in kept:
        assert uuid in listing
        meta = json.loads((tmp / "ckpts" / uuid / "metadata.json").read_text())
        assert meta["steps_completed"] in (90, 100)
        assert (tmp / "ckpts" / uuid / "state").exists()
    assert listing.count("COMPLETED") == 2
    assert d["trials"][0]["latest_checkpoint"] in kept


def refused_submission(h: Hpcdet, tmp: Path, searcher: str) -> None:
    ctx = tmp / "ctx"
    ctx.mkdir()
    (ctx / "x.py").write_text("print('never runs')\n")
    cfg = tmp / "refused.yaml"
    cfg.write_text(
        f"name: refused\nentrypoint: python3 x.py\nsearcher: {searcher}\n"
        "hyperparameters:\n  a: {type: int, minval: 1, maxval: 9}\n"
        "slurm:\n  partition: no-such-partition\nmax_restarts: 0\n"
    )
    out = h.run("experiment", "create", str(cfg), str(ctx)).stdout
    assert "Created experiment 1" in out
    assert "invalid partition" in out.lower(), out  # the scheduler's own words
    d = h.wait_state(1, {"ERROR"}, timeout=60)
    described = h.run("experiment", "describe", "1").stdout
    assert "invalid partition" in described.lower(), described
    assert all(t["state"] in ("ERROR", "CANCELED") for t in d["trials"])


def preempt_through_slurm_signal(
    h: Hpcdet, tmp: Path, config: str = "2_checkpoints.yaml", per_step: int = 1
) -> None:
    """The scheduler's preemption notice (SIGUSR2 to the batch shell, as --signal sends it
    before the walltime) makes the trial checkpoint and exit; the daemon resubmits it and it
    ends exactly as an uninterrupted run."""
    ctx = copy_examples(tmp / "ctx")
    exp = h.create(ctx / config, ctx)
    h.wait_for("a first checkpoint", lambda: _first_checkpoint_seen(h, exp))
    job = h.describe(exp)["runs"][0]["job_id"]
    subprocess.run(["scancel", "--signal=USR2", "--batch", job], check=True)
    d = h.wait_state(exp, {"COMPLETED", "ERROR"})
    assert d["experiment"]["state"] == "COMPLETED", d
    runs = d["runs"]
    assert len(runs) == 2 and runs[0]["outcome"] == "preempted", runs
    assert d["trials"][0]["restarts"] == 0
    rows = h.metrics(d["trials"][0]["id"])
    assert [(r["steps_completed"], r["metrics"]["x"]) for r in rows
            if r["group"] == "training"] == [(s, per_step * s) for s in range(10, 101, 10)]
    assert [r["metrics"] for r in rows if r["group"] == "validation"] == [
        {"x": 100 * per_step}]


def longer_than_walltime(h: Hpcdet, tmp: Path, limit: str = "slurm:\n  walltime: 1\n",
                         steps: int = 160) -> None:
    """A trial that needs longer than the job's walltime (``steps`` half seconds of work;
    ``limit``: the config's walltime, 1 min on Slurm) finishes across jobs with no user
    action; its metrics form one continuous series."""
    ctx = tmp / "ctx"
    ctx.mkdir()
    (ctx / "long.py").write_text((FIXTURES / "long_training.py").read_text())
    cfg = tmp / "long.yaml"
    cfg.write_text(
        "name: long\nentrypoint: python3 long.py\n"
        "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n"
        f"environment:\n  environment_variables: [STEPS={steps}]\n{limit}"
    )
    exp = h.create(cfg, ctx)
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=900)
    assert d["experiment"]["state"] == "COMPLETED", d
    runs = d["runs"]
    assert len(runs) >= 2, runs
    assert all(r["outcome"] in ("preempted", "timed out", "COMPLETED") for r in runs), runs
    assert d["trials"][0]["restarts"] == 0
    rows = h.metrics(d["trials"][0]["id"])
    training = [(r["steps_completed"], r["metrics"]["x"]) for r in rows
                if r["group"] == "training"]
    assert training == [(s, s) for s in range(10, steps + 1, 10)]
    assert [r["metrics"] for r in rows if r["group"] == "validation"] == [{"x": steps}]


def node_failure(h: Hpcdet, tmp: Path, cluster_script: Path) -> None:
    """The node running a trial dies (its slurmd and every process on it are killed): once
    Slurm marks the node failed, the daemon resubmits the trial from its latest checkpoint
    and it completes on the other node without using up max_restarts."""
    ctx = tmp / "ctx"
    ctx.mkdir()
    (ctx / "long.py").write_text((FIXTURES / "long_training.py").read_text())
    cfg = tmp / "long.yaml"
    cfg.write_text(
        "name: node-failure\nentrypoint: python3 long.py\n"
        "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n"
        "environment:\n  environment_variables: [STEPS=80]\n"
    )
    exp = h.create(cfg, ctx)
    h.wait_for("a first checkpoint", lambda: _first_checkpoint_seen(h, exp))
    trial = h.describe(exp)["trials"][0]["id"]
    info = h.state / "runs" / f"exp-{exp}" / "trials" / str(trial) / "run-1" / "nodes" / "0.json"
    node = json.loads(info.read_text())["agent_id"]
    pids = subprocess.run(["ip", "netns", "pids", node], capture_output=True, text=True,
                          check=True).stdout.split()
    for pid in pids:  # the node dies: slurmd, slurmstepd and the trial with it
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=300)
    finally:
        subprocess.run(["bash", str(cluster_script), "start"], check=True, capture_output=True)
    assert d["experiment"]["state"] == "COMPLETED", d
    runs = d["runs"]
    assert runs[0]["outcome"] == "node failure" and len(runs) == 2, runs
    assert d["trials"][0]["restarts"] == 0
    second = json.loads((info.parents[2] / "run-2" / "nodes" / "0.json").read_text())
    assert second["agent_id"] != node
    rows = h.metrics(trial)
    assert [r["metrics"] for r in rows if r["group"] == "validation"] == [{"x": 80}]


# ---- distributed trials (issue 4) ------------------------------------------------------------


def stage4(h: Hpcdet, tmp: Path) -> None:
    """The tutorial's stage 4 with its own launcher: 8 slots over 2 nodes (Slurm's)."""
    infos = stage4_nodes(h, tmp)
    assert {i["agent_id"] for i in infos} == {"node1", "node2"}
    assert infos[0]["container_addrs"] == infos[1]["container_addrs"]
    assert len(set(infos[0]["container_addrs"])) == 2


def stage4_nodes(h: Hpcdet, tmp: Path) -> list[dict[str, Any]]:
    """The tutorial's stage 4, as it is, completes with 8 ranks over 2 nodes: the cluster info
    each of the 2 nodes got."""
    ctx = copy_examples(tmp / "ctx")
    out = h.run("experiment", "create", str(ctx / "4_distributed.yaml"), str(ctx), "-f",
                timeout=300).stdout
    exp = int(out.split("Created experiment ")[1].split()[0])
    d = h.describe(exp)
    assert d["experiment"]["state"] == "COMPLETED", (d, out[-3000:])
    for rank in range(8):
        assert f"[rank={rank}]" in out, rank
    trial = d["trials"][0]["id"]
    run_dir = h.state / "runs" / f"exp-{exp}" / "trials" / str(trial) / "run-1"
    infos = [json.loads((run_dir / "nodes" / f"{n}.json").read_text()) for n in (0, 1)]
    rows = h.metrics(trial)
    training = [(r["steps_completed"], r["metrics"]["x"]) for r in rows
                if r["group"] == "training"]
    assert training == [(s, 8 * s) for s in range(10, 101, 10)]  # 8 increments per step
    assert [r["metrics"] for r in rows if r["group"] == "validation"] == [{"x": 800}]
    return infos


def kill_one_rank(h: Hpcdet, tmp: Path) -> None:
    """One of 8 ranks dies: the others stop within seconds, the trial restarts from its latest
    checkpoint (using one of max_restarts) and completes."""
    ctx = copy_examples(tmp / "ctx")
    exp = h.create(ctx / "4_distributed.yaml", ctx, "--config", "max_restarts=1")
    h.wait_for("a first checkpoint", lambda: _first_checkpoint_seen(h, exp))
    # Rank 5 runs on the second node. Other tests may run 4_distributed.py beside this one:
    # this trial's workers are those whose environment names this state directory.
    found = [pid for pid in subprocess.run(["pgrep", "-f", "4_distributed.py worker 5 "],
                                           capture_output=True, text=True).stdout.split()
             if str(h.root) in _environment(pid)]
    assert found, "rank 5 is not running"
    killed_at = time.time()
    for pid in found:
        os.kill(int(pid), signal.SIGKILL)
    h.wait_for("the first run to end", lambda: h.describe(exp)["runs"][0]["ended"] is not None,
               timeout=60)
    first = h.describe(exp)["runs"][0]
    assert first["ended"] - killed_at < 30, first
    assert first["exit_code"] != 0
    d = h.wait_state(exp, {"COMPLETED", "ERROR"}, timeout=300)
    assert d["experiment"]["state"] == "COMPLETED", d
    assert d["trials"][0]["restarts"] == 1 and len(d["runs"]) == 2
    rows = h.metrics(d["trials"][0]["id"])
    assert [r["metrics"] for r in rows if r["group"] == "validation"] == [{"x": 800}]


def ddp(h: Hpcdet, tmp: Path, config: str) -> None:
    """A torch DDP example (gloo, CPU) on 2 nodes x 2 workers."""
    import shutil

    ctx = tmp / "ctx"
    shutil.copytree(EXAMPLES.parent / "ddp", ctx)
    out = h.run("experiment", "create", str(ctx / config), str(ctx), "-f", timeout=300).stdout
    d = h.describe(1)
    assert d["experiment"]["state"] == "COMPLETED", (d, out[-3000:])
    for rank in range(4):
        assert f"[rank={rank}]" in out, rank
    trial = d["trials"][0]
    rows = h.metrics(trial["id"])
    validation = [r["metrics"] for r in rows if r["group"] == "validation"]
    assert validation and validation[-1]["validation_loss"] < 0.01, validation
    assert [r for r in rows if r["group"] == "training"]
    ckpt = h.state / "checkpoints" / trial["latest_checkpoint"]
    assert (ckpt / "model.pt").exists() and (ckpt / "metadata.json").exists()


def never_fits(h: Hpcdet, tmp: Path, section: str = "slurm",
               partition: str = "'debug'") -> None:
    """A trial the partition can never hold is refused at submit, naming the limits."""
    ctx = tmp / "ctx"
    ctx.mkdir()
    (ctx / "x.py").write_text("print('never runs')\n")
    cfg = tmp / "big.yaml"
    cfg.write_text(
        "name: too-big\nentrypoint: python3 x.py\n"
        "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n"
        f"resources: {{slots_per_trial: 16}}\n{section}: {{slots_per_node: 4}}\n"
    )
    out = h.run("experiment", "create", str(cfg), str(ctx)).stdout
    assert "needs 4 node(s) x 4 CPU slot(s)" in out and f"{partition} has 2 node(s)" in out, out
    d = h.wait_state(1, {"ERROR"}, timeout=60)
    assert d["runs"] == []  # nothing was left pending in the queue


def killed_at_walltime(h: Hpcdet, tmp: Path, limit: str) -> None:
    """A trial that ignores the deadline notice is killed by the scheduler at its walltime:
    its run ends timed out, not failed (the harness's exit 143 alone looks like a failure),
    and no restart is used."""
    ctx = tmp / "ctx"
    ctx.mkdir()
    (ctx / "sleep.py").write_text("import time\nprint('sleeping', flush=True)\ntime.sleep(300)\n")
    cfg = tmp / "overrun.yaml"
    cfg.write_text("name: overrun\nentrypoint: python3 sleep.py\n"
                   "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n"
                   + limit)
    exp = h.create(cfg, ctx)

    def first_run_ended() -> bool:
        runs = h.describe(exp)["runs"]
        return bool(runs) and runs[0]["ended"] is not None

    h.wait_for("run 1 to end", first_run_ended, timeout=180)
    d = h.describe(exp)
    run1 = d["runs"][0]
    # 143 when the trial died of the SIGTERM and the script wrote its exit; none if SIGKILL
    # came first.
    assert (run1["state"], run1["outcome"]) == ("TIMEOUT", "timed out"), d
    assert run1["exit_code"] in (143, None), d
    assert d["trials"][0]["restarts"] == 0, d["trials"]
    h.run("experiment", "kill", str(exp))
    h.wait_state(exp, {"CANCELED"}, timeout=60)


def private_tree(roots: list[Path]) -> list[str]:
    """Every path under ``roots`` that its group or other users may read, write or enter."""
    exposed = []
    for root in roots:
        for path in [root, *root.rglob("*")]:
            mode = path.lstat().st_mode
            if not path.is_symlink() and mode & 0o077:
                exposed.append(f"{path} {mode & 0o7777:04o}")
    return exposed


def _stage2_under_umask_022(h: Hpcdet, ctx: Path) -> None:
    """Run the checkpointing stage to completion from a shell with the usual umask 022."""
    before = os.umask(0o022)
    try:
        exp = h.create(ctx / "2_checkpoints.yaml", ctx, "-f")
    finally:
        os.umask(before)
    assert h.describe(exp)["experiment"]["state"] == "COMPLETED"


def private_under_umask_022(h: Hpcdet, tmp: Path) -> None:
    """A real experiment with checkpoints, started from a shell with umask 022: the state
    directory, the database directory and every file hpcdet or the trial wrote are 0700/0600."""
    h.extra_env.update(HPCDET_FSTYPE="nfs4", HPCDET_LOCAL_DIR=str(tmp / "local-disk"))
    ctx = copy_examples(tmp / "ctx")
    _stage2_under_umask_022(h, ctx)
    assert list((h.state / "checkpoints").iterdir()), "the trial wrote no checkpoint"
    assert list((tmp / "local-disk").rglob("hpcdet.db"))
    exposed = private_tree([h.state, tmp / "local-disk"])
    assert exposed == [], "\n".join(exposed)


def shared_with_group(h: Hpcdet, tmp: Path, group: str | None = None,
                      member: str | None = None) -> None:
    """``share_with_group`` (``true``, or ``group`` by name): the state directory, run tree
    and checkpoints are readable by the group (0750/0640), never writable by it, and closed
    to everyone else. The daemon's own files (database, locks, status, local jobs) stay 0600/
    0700 though they lie in the shared state directory (issue 37): ``member``, a real account
    in ``group``, reads the run tree but can open none of them, and while it holds a shared
    flock on everything it can open, the daemon starts and an experiment runs."""
    with open(h.root / "cluster.yaml", "a") as f:
        f.write(f"share_with_group: {group or 'true'}\n")
    ctx = copy_examples(tmp / "ctx")
    _stage2_under_umask_022(h, ctx)
    modes = {p: p.lstat().st_mode & 0o777 for p in [h.state, *h.state.rglob("*")]}
    wrong = [f"{p} {m:04o}" for p, m in modes.items() if m & 0o027]
    assert wrong == [], "\n".join(wrong)
    shared = [h.state, h.state / "runs", *(h.state / "checkpoints").rglob("*"),
              *h.state.glob("runs/exp-*/trials/*/run-*/logs/*"),
              *h.state.glob("runs/exp-*/experiment.json")]
    for path in shared:
        assert modes[path] & 0o040, f"{path} {modes[path]:04o} is not readable by the group"
    own = _daemons_own(h.state)
    assert {"hpcdet.db", "daemon.lock", "counter"} <= {p.name for p in own}, own
    wrong = [f"{p} {modes[p]:04o}" for p in own if modes[p] & 0o077]
    assert wrong == [], "the daemon's own files are open to others:\n" + "\n".join(wrong)
    status = h.run("daemon", "status").stdout
    assert "warning" not in status, status  # shared on purpose
    if member is None:
        return
    files = [p for p in shared if p.is_file()]
    read = _as_user(member, 'for p; do cat "$p" >/dev/null 2>&1 && echo "$p"; done; exit 0',
                    *map(str, files + own))
    assert read.stdout.split() == list(map(str, files)), f"{member} read:\n{read.stdout}"

    # An older hpcdet left the daemon's files open to the group: a start closes them.
    h.stop()
    own = _daemons_own(h.state)
    for path in own:
        # SQLite's -shm and -wal go with the last connection (a reader's may close just now).
        with contextlib.suppress(FileNotFoundError):
            path.chmod(0o750 if path.is_dir() else 0o640)
    h.run("daemon", "start")
    closed = [p for p in own if (p.parent == h.state or p.name == "counter")  # and in a 0700
              and p.exists()]
    wrong = [f"{p} {p.stat().st_mode & 0o777:04o}" for p in closed if p.stat().st_mode & 0o077]
    assert wrong == [], "a daemon start left them open:\n" + "\n".join(wrong)

    # The member holds a shared lock on all it can open, and the daemon is not held up.
    h.stop()
    everything = [str(p) for p in h.state.rglob("*") if p.is_file()]
    hold = subprocess.Popen(
        ["runuser", "-u", member, "--", "sh", "-c",
         'for p; do flock -s "$p" sleep 600 </dev/null >/dev/null 2>&1 & done; echo held; '
         'wait', "sh", *everything],
        stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert hold.stdout is not None and hold.stdout.readline() == "held\n"
        time.sleep(1)  # the flocks are taken
        started = time.monotonic()
        h.run("daemon", "start", timeout=60)
        exp = h.create(ctx / "0_start.yaml", ctx, "-f")
        assert h.describe(exp)["experiment"]["state"] == "COMPLETED"
        took = time.monotonic() - started
        assert took < 60, f"the daemon took {took:.0f} s with {member}'s locks held"
    finally:
        os.killpg(hold.pid, signal.SIGKILL)
        hold.wait()


def _daemons_own(state: Path) -> list[Path]:
    """The daemon's own files in a state directory on local disk (its local directory)."""
    names = ("hpcdet.db", "hpcdet.db-wal", "hpcdet.db-shm", "daemon.lock", "daemon.log",
             "status.json")
    jobs = state / "local-jobs"
    return [*(state / n for n in names if (state / n).exists()),
            *([jobs, *jobs.iterdir()] if jobs.is_dir() else [])]


def _as_user(user: str, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", user, "--", "sh", "-c", script, "sh", *args],
                          capture_output=True, text=True, timeout=120, check=False)


PLANTED = "open({marker!r}, 'w').write('a planted hpcdet package ran')\n"


def two_users(a: Hpcdet, b: str, tmp: Path) -> None:
    """User ``b`` attacks user ``a`` (both unprivileged; the test runs as root).

    Before A's first run, B creates A's predictable database directory in /var/tmp, open to
    A, with an ``hpcdet`` package in it: A's hpcdet refuses the directory, saying whose it is,
    and nothing of B's runs. Then A runs an experiment with checkpoints from a shell with umask
    022, and B can list or read nothing under A's state directory, database directory or
    checkpoints.
    """
    import hashlib
    import pwd
    import shutil

    assert a.user is not None
    tmp.chmod(0o1777)  # where a planted package would leave its mark, whoever runs it
    marker = tmp / "planted-ran"
    a.extra_env["HPCDET_FSTYPE"] = "nfs4"  # the database goes to /var/tmp/hpcdet-<uid>/<digest>
    base = Path(f"/var/tmp/hpcdet-{pwd.getpwnam(a.user).pw_uid}")
    local = base / hashlib.sha1(str(a.state).encode()).hexdigest()[:12]
    shutil.rmtree(base, ignore_errors=True)
    try:
        planted = _as_user(
            b, 'mkdir -p "$1/hpcdet" && printf "%s" "$2" > "$1/hpcdet/__init__.py" && '
               'chmod -R a+rwx "$1" && chmod a+rwx "$3"',
            str(local), PLANTED.format(marker=str(marker)), str(base))
        assert planted.returncode == 0, planted.stderr
        ctx = copy_examples(tmp / "ctx")
        ctx.chmod(0o755)
        refused = a.run("experiment", "create", str(ctx / "0_start.yaml"), str(ctx), "-f",
                        check=False)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert f"{base} is a directory owned by user {b}" in refused.stderr, refused.stderr
        assert "HPCDET_LOCAL_DIR" in refused.stderr and "Traceback" not in refused.stderr
        assert not marker.exists(), marker.read_text()
        shutil.rmtree(base)

        before = os.umask(0o022)
        try:
            exp = a.create(ctx / "2_checkpoints.yaml", ctx, "-f")
        finally:
            os.umask(before)
        assert a.describe(exp)["experiment"]["state"] == "COMPLETED"
        assert not marker.exists(), marker.read_text()
        paths = [str(p) for root in (a.state, local) for p in (root, *root.rglob("*"))]
        names = {Path(p).name for p in paths}
        assert {"journal.jsonl", "events.jsonl", "hpcdet.db", "metadata.json"} <= names, names
        assert any("/checkpoints/" in p for p in paths)
        read = _as_user(
            b, 'for p; do if [ -d "$p" ]; then ls "$p"; else cat "$p"; fi >/dev/null 2>&1 '
               '&& echo "$p"; done; exit 0', *paths)
        assert read.returncode == 0 and read.stdout == "", f"{b} could read:\n{read.stdout}"
    finally:
        a.stop()
        shutil.rmtree(base, ignore_errors=True)


def _fake_wheel(directory: Path, name: str, version: str) -> Path:
    """A wheel of a package ``name`` at ``version`` that pip installs offline."""
    import zipfile

    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hpcdet-tests\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel


# What a trial's python3 finds as its own site-packages, and what it imports pydantic from.
_SHOW = ("import sysconfig, pydantic; print('trial sees pydantic', pydantic.VERSION, 'from', "
         "pydantic.__file__)")


def hooks_cannot_break_hpcdet(h: Hpcdet, tmp: Path, python: str | None = None) -> None:
    """A startup hook that installs `pydantic<2` (examples/features/ports/ray_launcher does) and
    one that deletes the site-packages of the python3 it finds leave every hpcdet command
    working: trials run with the user's interpreter (``python``; by default the python3 on
    PATH, which in the tests is hpcdet's own, overlaid), never in hpcdet's packages."""
    ctx = tmp / "ctx"
    _fake_wheel(ctx / "wheels", "pydantic", "1.10.99")
    (ctx / "startup-hook.sh").write_text(
        'python3 -m pip install -q --no-index --find-links "$PWD/wheels" "pydantic<2"\n'
        'pip install -q --no-index --find-links "$PWD/wheels" --force-reinstall "pydantic<2"\n')
    (ctx / "show.py").write_text(_SHOW + "\n")
    env = f"environment: {{python: {python}}}\n" if python else ""
    cfg = tmp / "hook.yaml"
    cfg.write_text("name: pip-hook\nentrypoint: python3 show.py\nmax_restarts: 0\n" + env +
                   "searcher: {name: single, metric: x, max_length: 1}\n")
    before = _hpcdets_pydantic(h)
    out = h.run("experiment", "create", str(cfg), str(ctx), "-f").stdout
    assert "trial sees pydantic 1.10.99" in out, out
    assert _hpcdets_pydantic(h) == before and not before.startswith("1."), before
    (ctx / "startup-hook.sh").write_text(
        'site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()[\'purelib\'])")\n'
        'echo "deleting $site"\nrm -rf "$site"/*\n')
    (ctx / "show.py").write_text("print('the entrypoint ran')\n")
    out = h.run("experiment", "create", str(cfg), str(ctx), "-f").stdout
    assert "deleting " in out and "the entrypoint ran" in out, out
    assert _hpcdets_pydantic(h) == before
    listed = h.run("experiment", "list").stdout
    assert "pip-hook" in listed, listed
    assert h.run("experiment", "describe", "1").returncode == 0


def _hpcdets_pydantic(h: Hpcdet) -> str:
    return subprocess.run([h.python, "-c", "import pydantic, sqlmodel; print(pydantic.VERSION)"],
                          capture_output=True, text=True, check=True).stdout.strip()


# ---- the SDK (issue 14) ----------------------------------------------------------------------


def sdk_notebook(h: Hpcdet, tmp: Path) -> None:
    """A notebook-style script on the login node, through Determined's SDK names: it creates a
    two-trial grid, waits, reads the metrics and downloads the best checkpoint."""
    ctx = copy_examples(tmp / "ctx")
    cfg = tmp / "grid.yaml"
    cfg.write_text("name: sdk-grid\nentrypoint: python3 3_hpsearch.py\nmax_restarts: 0\n"
                   "hyperparameters: {increment_by: {type: categorical, vals: [3, 1]}}\n"
                   "searcher: {name: grid, metric: x, max_length: 20}\n")
    out = tmp / "best"
    env = h.env()
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    p = subprocess.run([h.python, str(FIXTURES / "sdk_notebook.py"), str(cfg), str(ctx),
                        str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    found = json.loads(p.stdout.strip().splitlines()[-1])
    assert found["completed"] and found["trials"] == 2 and found["listed"], found
    # grid order: increment_by 3, then 1; x = increment_by * 20 at step 20
    assert sorted(v["x"] for v in found["validation"]) == [20, 60]
    assert sorted(found["training_steps"]) == [10, 10, 20, 20]
    assert found["best"] == found["trial_best"] and found["best_steps"] == 20
    exp = int(json.loads(h.run("experiment", "list", "--json").stdout)[-1]["id"])
    trials = {t["id"]: t for t in h.describe(exp)["trials"]}
    assert trials[found["best_trial"]]["hparams"] == {"increment_by": 1}
    # the best checkpoint's files, here: x=20 at step 20 of the best trial
    assert Path(found["path"]) == out
    assert (out / "state").read_text() == f"20,20,{found['best_trial']}"


def max_slots(h: Hpcdet, tmp: Path, cap: int, trials: int) -> tuple[int, list[int]]:
    """A grid of ``trials`` one-slot trials with resources.max_slots ``cap``: all complete,
    and never more than ``cap`` of them run at once. Returns (the most that ran at once, the
    throttles of the job arrays it submitted)."""
    ctx = copy_examples(tmp / "ctx")
    cfg = tmp / "capped.yaml"
    values = ", ".join(str(v) for v in range(1, trials + 1))
    cfg.write_text("name: capped\nentrypoint: python3 3_hpsearch.py\nmax_restarts: 0\n"
                   f"resources: {{max_slots: {cap}}}\n"
                   f"hyperparameters: {{increment_by: {{type: categorical, vals: [{values}]}}}}\n"
                   "searcher: {name: grid, metric: x, max_length: 20}\n")
    exp = h.create(cfg, ctx)
    d = h.wait_state(exp, {"COMPLETED", "ERROR", "CANCELED"}, timeout=600)
    assert d["experiment"]["state"] == "COMPLETED", d
    # When each trial ran, from its own log's first and last lines.
    spans = []
    for t in d["trials"]:
        stamps = [json.loads(line)["timestamp"] for line in h.run(
            "trial", "logs", str(t["id"]), "--json").stdout.splitlines()]
        spans.append((min(stamps), max(stamps)))
    most = max(sum(1 for a, b in spans if a <= start <= b) for start, _ in spans)
    journal = (h.state / "runs" / f"exp-{exp}" / "journal.jsonl").read_text().splitlines()
    throttles = [e["throttle"] for e in map(json.loads, journal)
                 if e.get("kind") == "array_submitted"]
    return most, throttles
