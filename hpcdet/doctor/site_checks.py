"""Findings about the batch system itself, pure functions of what it said (`SiteFacts`)."""

from __future__ import annotations

from hpcdet.doctor.findings import Finding, Status
from hpcdet.schedulers.site_probe import Pool, SiteFacts

# Seconds hpcdet's trials get at most to checkpoint before the walltime (daemon/jobspec.py).
GRACE_SECONDS = 120


def backend(facts: SiteFacts, asked: dict[str, str]) -> Finding:
    """``asked``: each probe command that failed, and how."""
    failures = "; ".join(f"{name}: {why}" for name, why in asked.items())
    if facts.version is None:
        return Finding("backend", Status.FAIL,
                       f"{facts.backend}: the scheduler did not say its version ({failures})",
                       "check that the scheduler's commands work on this node (PATH, the "
                       "controller reachable), or set backend: in cluster.yaml")
    seen = f"{facts.backend} {facts.version}" + "".join(
        f", {k} {v}" for k, v in sorted(facts.extra.items()))
    if failures:
        return Finding("backend", Status.WARN, f"{seen}; not answered: {failures}",
                       "some scheduler commands failed here; the findings that need them are"
                       " incomplete")
    return Finding("backend", Status.OK, seen)


def history(facts: SiteFacts) -> Finding:
    if facts.history is None:
        return Finding("job history", Status.SKIPPED, "the scheduler did not say")
    if facts.history:
        return Finding("job history", Status.OK, facts.history_how)
    change = ("ask the administrators for accounting (slurmdbd, AccountingStorageType="
              "accounting_storage/slurmdbd); until then hpcdet learns how a job ended from its"
              " run directory, and a job that dies before writing it shows as lost"
              if facts.backend == "slurm" else
              "ask the administrators for `qmgr -c 'set server job_history_enable = True'`;"
              " until then hpcdet learns how a job ended from its run directory only")
    return Finding("job history", Status.WARN, facts.history_how, change)


def _pool_line(p: Pool) -> str:
    gpus = f", {p.gpus_per_node} GPUs" if p.gpus_per_node else ", no GPUs"
    grace = "" if p.grace_seconds is None else f", grace {p.grace_seconds} s"
    return (f"{p.name}{' (default)' if p.default else ''}: {p.state}; {p.nodes} nodes x "
            f"{p.cpus_per_node} CPUs{gpus}, time limit {p.max_time or 'none'}{grace}")


def pools(facts: SiteFacts) -> Finding:
    kind = "partitions" if facts.backend == "slurm" else "queues"
    if not facts.pools:
        return Finding(kind, Status.FAIL, f"the scheduler listed no {kind}",
                       f"check that this user may see the {kind} (`sinfo`, `qstat -Q`)")
    return Finding(kind, Status.OK, "; ".join(_pool_line(p) for p in facts.pools))


def chosen_pool(facts: SiteFacts, wanted: str | None) -> tuple[Finding, Pool | None]:
    """The partition (queue) hpcdet's jobs go to without a resource_pool: ``wanted`` (the
    cluster config's default pool, or --partition), else the site's default."""
    kind = "partition" if facts.backend == "slurm" else "queue"
    known = {p.name: p for p in facts.pools}
    name = wanted or next((p.name for p in facts.pools if p.default), None)
    if name is None:
        return Finding(kind, Status.WARN, f"the site has no default {kind}",
                       f"set default_pool: (a {kind}) in cluster.yaml, or resources."
                       "resource_pool in each experiment"), None
    pool = known.get(name)
    if pool is None:
        return Finding(kind, Status.FAIL, f"{kind} {name!r} does not exist here; the site has"
                       f" {', '.join(sorted(known)) or 'none'}",
                       "set default_pool: (or partitions:) in cluster.yaml to one of them"), None
    if not pool.up:
        return Finding(kind, Status.FAIL, f"{kind} {name!r} is {pool.state}: jobs sent there "
                       "wait", f"choose another {kind} (default_pool: in cluster.yaml, or "
                       "--partition), or ask the administrators when it comes back"), pool
    return Finding(kind, Status.OK, _pool_line(pool)), pool


def limits(facts: SiteFacts) -> Finding:
    array = facts.max_array_size
    jobs = facts.max_jobs
    seen = (f"largest array {array - 1 if array else 'unknown'} (max_array_size "
            f"{array or 'not set'}), at most {jobs or 'unknown'} jobs queued")
    if facts.max_user_jobs is not None:
        seen += f"; at most {facts.max_user_jobs} of yours ({facts.max_user_jobs_by})"
    elif facts.backend == "slurm":
        seen += ("; no per-user limit in your associations or their QOS" if facts.history
                 else "; no accounting, so no per-user MaxSubmitJobs")
    if facts.max_user_jobs is not None and facts.max_user_jobs < 100:
        return Finding("limits", Status.WARN, seen,
                       f"hpcdet keeps one job per running trial and an array per search; set "
                       f"max_jobs: {facts.max_user_jobs} in the cluster config so that it "
                       "waits instead of having submissions refused")
    if array is not None and array < 100:
        return Finding("limits", Status.WARN, seen,
                       "a search larger than the array limit is split over several arrays; "
                       "set max_concurrent_trials to stay under it")
    return Finding("limits", Status.OK, seen)


def preemption(facts: SiteFacts, pool: Pool | None) -> Finding:
    signal = f"hpcdet's jobs get {facts.preempt_signal}"
    if facts.backend != "slurm":
        delay = "" if pool is None or pool.grace_seconds is None else (
            f"; queue {pool.name} kill_delay {pool.grace_seconds} s")
        return Finding("preemption", Status.OK, signal + delay)
    if facts.preempt_type in ("", "preempt/none"):
        return Finding("preemption", Status.OK,
                       f"no preemption (PreemptType={facts.preempt_type or 'unset'}); {signal}")
    seen = f"PreemptType={facts.preempt_type}, PreemptMode={facts.preempt_mode}; {signal}"
    mode = (pool.preempt_mode if pool and pool.preempt_mode else facts.preempt_mode).upper()
    if mode == "OFF":
        where = f"partition {pool.name}" if pool else "the partition"
        return Finding("preemption", Status.OK, f"{seen}; {where} is not preempted "
                       "(PreemptMode=OFF)")
    if "SUSPEND" in mode or "GANG" in mode:
        return Finding("preemption", Status.WARN, seen,
                       "suspended jobs keep their GPU memory and wall clock runs on; ask for "
                       "PreemptMode=REQUEUE (hpcdet checkpoints on SIGTERM)")
    if pool is not None and (pool.grace_seconds or 0) < 30:
        return Finding("preemption", Status.WARN,
                       f"{seen}; partition {pool.name} GraceTime={pool.grace_seconds or 0}",
                       f"a preempted job is killed right after SIGTERM, with no time to "
                       f"checkpoint: ask for GraceTime={GRACE_SECONDS} on partition {pool.name}")
    return Finding("preemption", Status.OK, seen)


__all__ = ["backend", "chosen_pool", "history", "limits", "pools", "preemption"]
