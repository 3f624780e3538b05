"""Slurm as `hpcdet doctor` asks it: ``scontrol show config`` (version, accounting, limits,
preemption), ``sinfo`` (node sizes, GPUs, state), ``scontrol show partition --oneliner``
(time limits, GraceTime, PreemptMode), ``sacctmgr`` (the user's associations and QOS: job
limits per user; it fails at once without slurmdbd), and tiny probe jobs through sbatch.

Facts: slurm.conf(5) (PreemptType, PreemptMode, GraceTime, AccountingStorageType),
sinfo(1) (%P %a %l %D %c %G %T), scontrol(1), sacctmgr(1) (``--noheader --parsable2``:
fields split by ``|``; an empty field is no limit).
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import ClassVar

from hpcdet.schedulers.site_probe import Pool, SiteFacts, SiteProbe, key_values, leading_int

_SINFO_FORMAT = "%P|%a|%l|%D|%c|%G|%T"


def gpus_in(gres: str) -> int:
    """GPUs per node from a gres string such as ``gpu:a100:4(S:0-1),shard:8``."""
    total = 0
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu":
            total += leading_int(parts[-1]) if len(parts) > 1 else 1
    return total


def parse_sinfo_pools(stdout: str) -> dict[str, Pool]:
    """``sinfo --noheader -o '%P|%a|%l|%D|%c|%G|%T'``: one line per partition and node state,
    added up per partition (``*`` marks the default)."""
    found: dict[str, Pool] = {}
    for line in stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 7:
            continue
        name, avail, limit, nodes, cpus, gres, state = parts
        default = name.endswith("*")
        name = name.rstrip("*")
        seen = found.get(name)
        states = [*(seen.state.split(", ")[1:] if seen else []), state]
        found[name] = Pool(
            name, avail == "up", ", ".join([avail, *states]),
            (seen.nodes if seen else 0) + leading_int(nodes),
            max(seen.cpus_per_node if seen else 0, leading_int(cpus)),
            max(seen.gpus_per_node if seen else 0, gpus_in(gres)),
            limit, default=default or bool(seen and seen.default),
        )
    return found


def parse_partition_lines(stdout: str) -> dict[str, dict[str, str]]:
    """``scontrol show partition --oneliner``: each partition's ``Key=Value`` words."""
    found = {}
    for line in stdout.splitlines():
        words = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if "PartitionName" in words:
            found[words["PartitionName"]] = words
    return found


def _number(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


class SlurmSite(SiteProbe):
    backend: ClassVar[str] = "slurm"
    optional: ClassVar[frozenset[str]] = frozenset({"associations", "qos"})

    def commands(self) -> dict[str, list[str]]:
        return {
            "config": ["scontrol", "show", "config"],
            "sinfo": ["sinfo", "--noheader", "-o", _SINFO_FORMAT],
            "partitions": ["scontrol", "show", "partition", "--oneliner"],
            "associations": ["sacctmgr", "--noheader", "--parsable2", "show", "association",
                             f"user={getpass.getuser()}", "format=Account,QOS,MaxSubmitJobs"],
            "qos": ["sacctmgr", "--noheader", "--parsable2", "show", "qos",
                    "format=Name,MaxSubmitJobsPerUser"],
        }

    def parse(self, outputs: dict[str, str]) -> SiteFacts:
        config = key_values(outputs.get("config", ""))
        pools = parse_sinfo_pools(outputs.get("sinfo", ""))
        details = parse_partition_lines(outputs.get("partitions", ""))
        merged = []
        for name, pool in pools.items():
            words = details.get(name, {})
            merged.append(Pool(
                pool.name, pool.up and words.get("State", "UP") == "UP", pool.state, pool.nodes,
                pool.cpus_per_node, pool.gpus_per_node, words.get("MaxTime", pool.max_time),
                _number(words.get("GraceTime")), words.get("PreemptMode", ""), pool.default,
            ))
        storage = config.get("AccountingStorageType")
        history = None if storage is None else not storage.endswith("/none")
        how = (f"sacct ({storage})" if history else
               f"AccountingStorageType={storage}: no sacct" if storage else "")
        user_jobs, user_jobs_by = user_job_limit(outputs.get("associations", ""),
                                                 outputs.get("qos", ""))
        return SiteFacts(
            "slurm", config.get("SLURM_VERSION"), history, how, tuple(merged),
            _number(config.get("MaxArraySize")), _number(config.get("MaxJobCount")),
            config.get("PreemptType", ""), config.get("PreemptMode", ""),
            # templates/slurm.sbatch.j2 asks for it; _harness.sh.j2 traps USR2 and TERM.
            "SIGUSR2 to the batch shell before the walltime (--signal=B:USR2@grace, grace "
            "10-120 s); SIGTERM on preemption",
            {k: config[k] for k in ("ClusterName", "JobAcctGatherType", "KillWait",
                                    "PreemptParameters")
             if k in config},
            max_user_jobs=user_jobs, max_user_jobs_by=user_jobs_by,
        )

    def submit_command(self, script: Path, *, name: str, nodes: int, pool: str | None,
                       output: Path, minutes: int) -> list[str]:
        return ["sbatch", "--parsable", f"--job-name={name}", f"--nodes={nodes}",
                "--ntasks-per-node=1", f"--time={minutes}", f"--output={output}",
                *([f"--partition={pool}"] if pool else []), str(script)]

    def on_each_node(self) -> str:
        return "srun --kill-on-bad-exit=1"

    def preemption_command(self, job_id: str, facts: SiteFacts, pool: str | None) -> list[str]:
        # slurm.conf(5), src/slurmctld/preempt.c: a job preempted by REQUEUE or CANCEL gets
        # SIGCONT and SIGTERM, or with PreemptParameters=send_user_signal its own --signal
        # (B:USR2, templates/slurm.sbatch.j2); GraceTime later it is canceled. Measured on the
        # test cluster (22.05.8, partition_prio, REQUEUE, GraceTime=30): the first SIGTERM
        # reaches the job's steps and not the batch step, as `scancel --signal=TERM` sends it;
        # the cancel signals srun too, which then kills its step. Without preemption the one
        # notice is --signal=B:USR2 before the walltime, to the batch shell only (`--batch`).
        if preempts(facts, pool) and not sends_user_signal(facts):
            return ["scancel", "--signal=TERM", job_id]
        return ["scancel", "--signal=USR2", "--batch", job_id]


def user_job_limit(associations: str, qos: str) -> tuple[int | None, str]:
    """The fewest jobs the user may have queued, and the limit that says so, from
    ``sacctmgr -nP show association user=U format=Account,QOS,MaxSubmitJobs`` and
    ``sacctmgr -nP show qos format=Name,MaxSubmitJobsPerUser``; (None, "") where none does."""
    per_qos = {}
    for line in qos.splitlines():
        name, _, limit = line.strip().partition("|")
        if limit.isdigit():
            per_qos[name] = int(limit)
    found: list[tuple[int, str]] = []
    for line in associations.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3:
            continue
        account, qos_list, limit = parts
        if limit.isdigit():
            found.append((int(limit), f"MaxSubmitJobs of account {account}"))
        found += [(per_qos[q], f"MaxSubmitJobsPerUser of QOS {q}")
                  for q in qos_list.split(",") if q in per_qos]
    return min(found) if found else (None, "")


def preempts(facts: SiteFacts, pool: str | None) -> bool:
    """Whether jobs in ``pool`` are preempted by REQUEUE or CANCEL (not SUSPEND, not OFF)."""
    mode = next((p.preempt_mode for p in facts.pools if p.name == pool and p.preempt_mode),
                facts.preempt_mode).upper()
    return (facts.preempt_type not in ("", "preempt/none")
            and ("REQUEUE" in mode or "CANCEL" in mode))


def sends_user_signal(facts: SiteFacts) -> bool:
    return "send_user_signal" in facts.extra.get("PreemptParameters", "")


__all__ = ["SlurmSite", "gpus_in", "parse_partition_lines", "parse_sinfo_pools", "preempts",
           "sends_user_signal", "user_job_limit"]
