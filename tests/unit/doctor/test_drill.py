"""The preemption drill's pure part: the trial's text (it runs for real in the Slurm and PBS
double tests), its config as the validator sees it, the signal each backend sends, and the
judgement of what became of the experiment."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hpcdet.config import load_experiment_config
from hpcdet.doctor import drill
from hpcdet.doctor.drill import RunSeen, Seen, judge
from hpcdet.doctor.findings import Status
from hpcdet.schedulers.pbs_site import PbsSite
from hpcdet.schedulers.site_probe import Pool, SiteFacts
from hpcdet.schedulers.slurm_site import SlurmSite

SIGNAL = "scancel --signal=USR2 --batch 41"
GOOD = Seen(7, checkpoint_step=5, signal=SIGNAL, signaled_job="41", state="COMPLETED",
            runs=(RunSeen("41", "preempted", 0), RunSeen("42", "COMPLETED", 6)))


def test_the_script_compiles_and_the_config_is_valid() -> None:
    compile(drill.trial_script(), drill.SCRIPT, "exec")
    assert "core.preempt.should_preempt()" in drill.trial_script()
    cfg = load_experiment_config(drill.config_yaml("debug", Path("/scratch/ck")))
    assert cfg.raw["name"] == drill.NAME and cfg.raw["labels"] == [drill.LABEL]
    assert cfg.raw["searcher"]["name"] == "single" and cfg.raw["max_restarts"] == 0
    assert cfg.raw["resources"]["resource_pool"] == "debug"
    assert cfg.raw["checkpoint_storage"]["host_path"] == "/scratch/ck"
    bare = load_experiment_config(drill.config_yaml(None, None)).raw
    assert bare["resources"]["resource_pool"] == ""


def test_each_backend_sends_what_its_preemption_sends() -> None:
    slurm, pbs = SlurmSite(), PbsSite()
    # No preemption: the walltime notice templates/slurm.sbatch.j2 asks for, to the batch shell.
    off = SiteFacts("slurm", preempt_type="preempt/none", preempt_mode="OFF",
                    pools=(Pool("debug", True, "up", 2, 4, preempt_mode="REQUEUE"),))
    assert slurm.preemption_command("41", off, "debug") == [
        "scancel", "--signal=USR2", "--batch", "41"]
    # REQUEUE or CANCEL: SIGTERM to the job's steps, not its batch step (measured on the test
    # cluster); a partition's own mode wins over the cluster's.
    on = replace(off, preempt_type="preempt/partition_prio", preempt_mode="REQUEUE,GANG")
    assert slurm.preemption_command("41", on, None) == ["scancel", "--signal=TERM", "41"]
    # With send_user_signal a preemption sends the job's own --signal (src/slurmctld/preempt.c).
    told = replace(on, extra={"PreemptParameters": "send_user_signal,strict_order"})
    assert slurm.preemption_command("41", told, None)[1:3] == ["--signal=USR2", "--batch"]
    suspended = replace(on, pools=(Pool("debug", True, "up", 2, 4, preempt_mode="SUSPEND"),))
    assert slurm.preemption_command("41", suspended, "debug")[1] == "--signal=USR2"
    assert slurm.preemption_command("41", suspended, "other")[1] == "--signal=TERM"
    assert pbs.preemption_command("9.srv", SiteFacts("pbs"), None) == [
        "qsig", "-s", "TERM", "9.srv"]


def test_a_checkpoint_a_stop_and_a_resume_pass() -> None:
    found = judge(GOOD)
    assert found.status is Status.OK and found.change == ""
    assert found.seen == (f"experiment 7: after its first checkpoint, at step 5, `{SIGNAL}`: "
                          "job 41 checkpointed and stopped (preempted), job 42 resumed from "
                          "step 6 and completed")


def test_runs_before_the_signaled_one_are_the_sites_own_and_only_mentioned() -> None:
    seen = Seen(7, checkpoint_step=5, signal=SIGNAL, signaled_job="41", state="COMPLETED",
                runs=(RunSeen("40", "node failure"), *GOOD.runs))
    found = judge(seen)
    assert found.status is Status.OK
    assert found.seen.endswith("and completed (before it: job 40: node failure)")
    lost = judge(Seen(7, checkpoint_step=5, signal=SIGNAL, signaled_job="41", state="ERROR",
                      runs=(RunSeen("40", "preempted"), RunSeen("41", "exited with code 2"))))
    assert lost.status is Status.FAIL and "(job 41: exited with code 2)" in lost.seen


@pytest.mark.parametrize(("seen", "says", "change"), [
    (Seen(None, created_error="bad pool"), "could not be created: bad pool", "change what"),
    (Seen(7, seconds=180, runs=(RunSeen("41", ""),)), "made no checkpoint within 180 s "
     "(job 41: running); killed", "--drill-timeout"),
    (Seen(7, state="ERROR", runs=(RunSeen("41", "exited with code 1"),)),
     "ended ERROR before its first checkpoint", "hpcdet trial logs"),
    (Seen(7, checkpoint_step=5, seconds=180, runs=(RunSeen("40", "node failure"),
                                                    RunSeen("41", ""))),
     "checkpointed at step 5, then no job of it ran within 180 s", "--drill-timeout"),
    (Seen(7, checkpoint_step=5, signal=SIGNAL, signal_error="exited 1: Access denied"),
     "failed: exited 1: Access denied", "administrators"),
    (Seen(7, checkpoint_step=5, signal=SIGNAL, seconds=180, runs=(RunSeen("41", ""),)),
     "did not end within 180 s (job 41: running); killed", "GraceTime"),
    (Seen(7, checkpoint_step=5, signal=SIGNAL, state="COMPLETED",
          runs=(RunSeen("41", "COMPLETED"),)),
     "did not stop as preempted (job 41: COMPLETED)", "traps USR2 and TERM"),
    (Seen(7, checkpoint_step=5, signal=SIGNAL, state="ERROR",
          runs=(RunSeen("41", "exited with code 143; max_restarts (0) used up"),)),
     "did not stop as preempted (job 41: exited with code 143", "run the harness"),
    (Seen(7, checkpoint_step=5, signal=SIGNAL, state="COMPLETED",
          runs=(RunSeen("41", "preempted"), RunSeen("42", "COMPLETED", 0))),
     "job 42 started from step 0, not from the checkpoint", "host_path"),
    (Seen(7, checkpoint_step=5, signal=SIGNAL, state="ERROR", restarts=0,
          runs=(RunSeen("41", "preempted"), RunSeen("42", "exited with code 1"))),
     "job 42: exited with code 1, 0 restart(s); the experiment ended ERROR", "host_path"),
])
def test_each_failure_says_what_to_change(seen: Seen, says: str, change: str) -> None:
    found = judge(seen)
    assert found.status is Status.FAIL
    assert says in found.seen, found.seen
    assert change in found.change, found.change


def test_without_the_flag_the_drill_says_how_to_ask_for_it() -> None:
    found = drill.not_asked()
    assert found.status is Status.SKIPPED and "hpcdet doctor --preemption" in found.change


def test_the_drill_is_not_run_where_a_trial_could_not_run_or_resume() -> None:
    from hpcdet.doctor.diagnose import Options, _drill
    from hpcdet.doctor.findings import Finding
    from hpcdet.schedulers.runner import CommandRunner
    from hpcdet.schedulers.site_probe import SiteFacts

    ran: list[str | None] = []

    def run(probe: object, pool: str | None, runner: object) -> Finding:
        ran.append(pool)
        return Finding(drill.CHECK, Status.OK, "ran")

    facts, runner = SiteFacts("slurm", "22.05.8"), CommandRunner()
    broken = [Finding("state directory", Status.FAIL, "not shared")]
    found = _drill(Options(drill=run), facts, SlurmSite(), "debug", None, runner, broken)
    assert found.status is Status.SKIPPED and "the state directory check failed" in found.seen
    assert _drill(Options(drill=run), facts, SlurmSite(), "debug", None, runner, []).seen == "ran"
    assert _drill(Options(quick=True, drill=run), facts, SlurmSite(), None, None, runner, []
                  ).status is Status.SKIPPED
    assert ran == ["debug"]
