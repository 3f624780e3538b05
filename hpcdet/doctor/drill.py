"""The preemption drill of `hpcdet doctor --preemption`, the pure part: the tiny Core API
trial, its experiment config, and the judgement of what became of it. The views run it through
the user's daemon (hpcdet.views.doctor)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from hpcdet.doctor.findings import Finding, Status
from hpcdet.states import ExperimentState

CHECK = "preemption drill"
NAME = "hpcdet doctor: preemption drill"
LABEL = "hpcdet-doctor"
SCRIPT = "drill.py"
DEFAULT_TIMEOUT = 180.0
# A step every 0.2 s, a checkpoint every 5: the first comes a second in. The first run trains
# until it is told to stop (for MOST steps at most: then it did not hear the signal), so the
# signal cannot come too late; the resumed run finishes MORE steps on.
EVERY, SLEEP, MORE, MOST = 5, 0.2, 5, 3000

_TRIAL = '''"""hpcdet doctor's preemption drill: steps of {sleep} s, a checkpoint every {every};
told to stop, it checkpoints and exits. The first run trains until it is told to stop; the
run that resumes from its checkpoint trains {more} steps more and completes."""

import pathlib
import time

import determined as det

with det.core.init() as core:
    start = 0
    latest = core.info.latest_checkpoint if core.info else None
    if latest:
        with core.checkpoint.restore_path(latest) as path:
            start = int((pathlib.Path(path) / "step").read_text())
        print(f"resumed from checkpoint {{latest}} at step {{start}}", flush=True)
    last = start + {more} if latest else {most}
    for step in range(start + 1, last + 1):
        time.sleep({sleep})
        core.train.report_training_metrics(
            steps_completed=step, metrics={{"loss": 1.0 / step, "resumed_from": start}})
        stop = core.preempt.should_preempt()
        if stop or step % {every} == 0:
            with core.checkpoint.store_path({{"steps_completed": step}}) as (path, _):
                (path / "step").write_text(str(step))
        if stop:
            print(f"told to stop at step {{step}}: checkpointed, exiting", flush=True)
            raise SystemExit(0)
    core.train.report_validation_metrics(steps_completed=last, metrics={{"loss": 1.0 / last}})
'''


def trial_script() -> str:
    return _TRIAL.format(every=EVERY, sleep=SLEEP, more=MORE, most=MOST)


def config_yaml(pool: str | None, storage: Path | None) -> str:
    """The drill's experiment config (YAML; JSON is YAML): one trial, no restarts, in
    ``pool`` when one was chosen, checkpoints to ``storage`` when one was named."""
    config: dict[str, object] = {
        "name": NAME, "labels": [LABEL], "entrypoint": f"python3 {SCRIPT}",
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "max_restarts": 0,
    }
    if pool:
        config["resources"] = {"resource_pool": pool}
    if storage is not None:
        config["checkpoint_storage"] = {"type": "shared_fs", "host_path": str(storage)}
    return json.dumps(config, indent=2) + "\n"


@dataclass(frozen=True)
class RunSeen:
    job_id: str
    outcome: str  # the daemon's words: "preempted", "COMPLETED", "exited with code 143", ...
    resumed_from: int | None = None  # its first training report's, None without one


@dataclass(frozen=True)
class Seen:
    """What became of the drill's experiment, as the views read it."""

    experiment_id: int | None
    created_error: str = ""  # why it could not be created
    checkpoint_step: int | None = None  # the trial's first checkpoint, None if none came
    signal: str = ""  # the command that sent the signal, as the user would type it
    signaled_job: str = ""  # the job it was sent to
    signal_error: str = ""  # why sending it failed
    state: str = ""  # the experiment's final state; "" when it did not end in time
    restarts: int = 0
    runs: tuple[RunSeen, ...] = field(default_factory=tuple)
    seconds: float = 0.0  # the drill's time limit


_SIGNAL_LOST = ("the signal must reach the job's batch shell and hpcdet's harness (it traps "
                "USR2 and TERM): a batch script of the site's own (template_dir) must keep "
                "that trap and run the harness in the background; on Slurm, a preemption "
                "must leave time to checkpoint (PreemptMode=REQUEUE or CANCEL with a "
                "GraceTime of 60 s or more, not SUSPEND)")
_NO_RESUME = ("the resumed job must see the first job's checkpoints: "
              "checkpoint_storage.host_path (default <state>/checkpoints) must be on a "
              "filesystem every compute node mounts")


def judge(seen: Seen) -> Finding:
    exp = f"experiment {seen.experiment_id}"
    look = f"; see `hpcdet experiment describe {seen.experiment_id}` and `hpcdet trial logs`"
    if seen.experiment_id is None:
        return Finding(CHECK, Status.FAIL, f"the drill could not be created: "
                       f"{seen.created_error}", "change what the message names")
    runs = seen.runs
    if seen.checkpoint_step is None:
        if seen.state:
            return Finding(CHECK, Status.FAIL, f"{exp} ended {seen.state} before its first "
                           f"checkpoint ({_outcomes(runs)})", "the trial must run and "
                           "checkpoint" + look)
        return Finding(CHECK, Status.FAIL, f"{exp} made no checkpoint within "
                       f"{seen.seconds:.0f} s ({_outcomes(runs) or 'no job started'}); "
                       "killed", "if its job waited for nodes, run the doctor again when "
                       "they are free or give --drill-timeout more seconds" + look)
    if not seen.signal and not seen.state:
        return Finding(CHECK, Status.FAIL, f"{exp} checkpointed at step "
                       f"{seen.checkpoint_step}, then no job of it ran within "
                       f"{seen.seconds:.0f} s ({_outcomes(runs)}); killed", "if its job "
                       "waited for nodes, run the doctor again when they are free or give "
                       "--drill-timeout more seconds" + look)
    sent = f"{exp}: after its first checkpoint, at step {seen.checkpoint_step}, `{seen.signal}`"
    if seen.signal_error:
        return Finding(CHECK, Status.FAIL, f"{sent} failed: {seen.signal_error}",
                       "the scheduler must let you signal your own jobs; ask the "
                       "administrators")
    if not seen.state:
        return Finding(CHECK, Status.FAIL, f"{sent}; it did not end within "
                       f"{seen.seconds:.0f} s ({_outcomes(runs)}); killed",
                       (_SIGNAL_LOST if len(runs) < 2 else "give --drill-timeout more seconds")
                       + look)
    # Runs before the signaled one ended for the site's own reasons (a node failure):
    # the drill judges from the signaled run on.
    at = next((i for i, r in enumerate(runs) if r.job_id == seen.signaled_job), 0)
    before = f" (before it: {_outcomes(runs[:at])})" if at else ""
    runs = runs[at:]
    first = runs[0] if runs else None
    if first is None or first.outcome != "preempted":
        said = first.outcome if first else "no run"
        return Finding(CHECK, Status.FAIL, f"{sent}; the trial did not stop as preempted "
                       f"(job {first.job_id if first else '?'}: {said}); the experiment "
                       f"ended {seen.state}{before}", _SIGNAL_LOST + look)
    if seen.state != ExperimentState.COMPLETED or len(runs) != 2 or seen.restarts:
        return Finding(CHECK, Status.FAIL, f"{sent}; {_outcomes(runs)}, {seen.restarts} "
                       f"restart(s); the experiment ended {seen.state}{before}",
                       _NO_RESUME + look)
    second = runs[1]
    if not second.resumed_from:
        return Finding(CHECK, Status.FAIL, f"{sent}; job {first.job_id} stopped as "
                       f"preempted but job {second.job_id} started from step 0, not from "
                       f"the checkpoint{before}", _NO_RESUME + look)
    return Finding(CHECK, Status.OK, f"{sent}: job {first.job_id} checkpointed and stopped "
                   f"(preempted), job {second.job_id} resumed from step "
                   f"{second.resumed_from} and completed{before}")


def _outcomes(runs: tuple[RunSeen, ...]) -> str:
    return ", ".join(f"job {r.job_id}: {r.outcome or 'running'}" for r in runs)


def not_asked() -> Finding:
    return Finding(CHECK, Status.SKIPPED, "opt-in: it runs a one-trial experiment through "
                   "your daemon and sends its job the site's preemption signal",
                   "run `hpcdet doctor --preemption`")


__all__ = ["CHECK", "DEFAULT_TIMEOUT", "LABEL", "NAME", "SCRIPT", "RunSeen", "Seen",
           "config_yaml", "judge", "not_asked", "trial_script"]
