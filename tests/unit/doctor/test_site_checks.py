"""The findings about the batch system, from what it said: each names what to change."""

from __future__ import annotations

import dataclasses

from hpcdet.doctor import site_checks
from hpcdet.doctor.findings import Finding, Status, failed
from hpcdet.schedulers.site_probe import Pool, SiteFacts
from hpcdet.schedulers.slurm_site import SlurmSite
from tests.unit.schedulers.test_site_probe import CONFIG, PARTITIONS, SINFO, part

TEST_CLUSTER = SlurmSite().parse({"config": CONFIG, "sinfo": SINFO, "partitions": PARTITIONS})


def test_the_test_cluster_is_green_but_for_its_missing_accounting() -> None:
    f = TEST_CLUSTER
    found = [site_checks.backend(f, {}), site_checks.history(f), site_checks.pools(f),
             site_checks.chosen_pool(f, None)[0], site_checks.limits(f),
             site_checks.preemption(f, f.pools[0])]
    assert [x.status for x in found] == [Status.OK, Status.WARN, *[Status.OK] * 4]
    assert found[0].seen.startswith("slurm 22.05.8")
    assert "slurmdbd" in found[1].change
    assert "largest array 1000" in found[4].seen
    assert "SIGUSR2" in found[5].seen
    assert not failed(found)


def test_accounting_off_is_a_warning_that_says_what_to_ask_for() -> None:
    on = SlurmSite().parse({"config": CONFIG.replace("/none", "/slurmdbd")})
    assert site_checks.history(on) == Finding("job history", Status.OK,
                                              "sacct (accounting_storage/slurmdbd)")
    off = site_checks.history(TEST_CLUSTER)
    assert off.status is Status.WARN and "AccountingStorageType" in off.change


def test_a_partition_down_or_missing_fails_naming_the_others() -> None:
    down = SlurmSite().parse({"config": CONFIG, "sinfo": SINFO.replace("batch|up", "batch|down"),
                              "partitions": PARTITIONS})
    finding, pool = site_checks.chosen_pool(down, "batch")
    assert finding.status is Status.FAIL and pool is not None and not pool.up
    assert "is down, idle" in finding.seen and "--partition" in finding.change
    missing, none = site_checks.chosen_pool(TEST_CLUSTER, "nope")
    assert none is None and missing.status is Status.FAIL
    assert "'nope' does not exist here; the site has batch, debug, restricted" in missing.seen


def test_no_default_partition_is_a_warning() -> None:
    facts = dataclasses.replace(TEST_CLUSTER, pools=tuple(
        dataclasses.replace(p, default=False) for p in TEST_CLUSTER.pools))
    assert site_checks.chosen_pool(facts, None)[0].status is Status.WARN


def test_scheduler_that_did_not_answer_fails_the_backend() -> None:
    facts = SlurmSite().parse({})
    found = site_checks.backend(facts, {"config": "`scontrol show config` exited 1: down"})
    assert found.status is Status.FAIL and "exited 1: down" in found.seen
    assert site_checks.history(facts).status is Status.SKIPPED
    assert site_checks.pools(facts).status is Status.FAIL


def test_preemption_without_grace_time_or_by_suspension_warns() -> None:
    config = CONFIG.replace("preempt/none", "preempt/partition_prio")
    parts = "\n".join([part("low", mode="REQUEUE"), part("late", grace=300, mode="REQUEUE"),
                       part("off"), part("held", grace=300, mode="SUSPEND")])
    sinfo = "".join(f"{p}|up|infinite|2|4|(null)|idle\n" for p in ("low", "late", "off", "held"))
    facts = SlurmSite().parse({"config": config, "sinfo": sinfo, "partitions": parts})
    pools = {p.name: p for p in facts.pools}
    no_grace = site_checks.preemption(facts, pools["low"])
    assert no_grace.status is Status.WARN and "GraceTime=120 on partition low" in no_grace.change
    assert site_checks.preemption(facts, pools["late"]).status is Status.OK
    off = site_checks.preemption(facts, pools["off"])
    assert off.status is Status.OK and "partition off is not preempted" in off.seen
    assert site_checks.preemption(facts, pools["held"]).status is Status.WARN


def test_a_small_per_user_job_limit_warns_and_names_max_jobs() -> None:
    facts = dataclasses.replace(TEST_CLUSTER, history=True, max_user_jobs=20,
                                max_user_jobs_by="MaxSubmitJobsPerUser of QOS long")
    found = site_checks.limits(facts)
    assert found.status is Status.WARN
    assert "at most 20 of yours (MaxSubmitJobsPerUser of QOS long)" in found.seen
    assert "max_jobs: 20" in found.change
    roomy = site_checks.limits(dataclasses.replace(facts, max_user_jobs=500))
    assert roomy.status is Status.OK and "at most 500 of yours" in roomy.seen
    none = site_checks.limits(dataclasses.replace(facts, max_user_jobs=None))
    assert "no per-user limit in your associations" in none.seen


def test_a_small_array_limit_warns_and_pbs_preemption_names_kill_delay() -> None:
    facts = SiteFacts("pbs", "23.06.06", True, "qstat -x", (
        Pool("workq", True, "enabled, started", 2, 4, 0, "infinite", 2, "", True),),
        max_array_size=50, preempt_signal="none before the walltime")
    assert site_checks.limits(facts).status is Status.WARN
    assert "kill_delay 2 s" in site_checks.preemption(facts, facts.pools[0]).seen
    assert site_checks.pools(facts).check == "queues"
