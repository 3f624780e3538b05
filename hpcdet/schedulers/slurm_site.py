"""Slurm as `hpcdet doctor` asks it: ``scontrol show config`` (version, accounting, limits,
preemption), ``sinfo`` (node sizes, GPUs, state) and ``scontrol show partition --oneliner``
(time limits, GraceTime, PreemptMode), and tiny probe jobs through sbatch.

Facts: slurm.conf(5) (PreemptType, PreemptMode, GraceTime, AccountingStorageType),
sinfo(1) (%P %a %l %D %c %G %T), scontrol(1).
"""

from __future__ import annotations

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

    def commands(self) -> dict[str, list[str]]:
        return {
            "config": ["scontrol", "show", "config"],
            "sinfo": ["sinfo", "--noheader", "-o", _SINFO_FORMAT],
            "partitions": ["scontrol", "show", "partition", "--oneliner"],
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
        # (B:USR2, templates/slurm.sbatch.j2), then SIGKILL GraceTime later. `scancel --full`
        # sends SIGTERM to every process of the job, the batch step's srun included, which is
        # the worst case (preemption_note). Without preemption the one notice hpcdet's jobs
        # get is --signal=B:USR2 before the walltime, to the batch shell only (`--batch`).
        if preempts(facts, pool) and not sends_user_signal(facts):
            return ["scancel", "--signal=TERM", "--full", job_id]
        return ["scancel", "--signal=USR2", "--batch", job_id]


def preempts(facts: SiteFacts, pool: str | None) -> bool:
    """Whether jobs in ``pool`` are preempted by REQUEUE or CANCEL (not SUSPEND, not OFF)."""
    mode = next((p.preempt_mode for p in facts.pools if p.name == pool and p.preempt_mode),
                facts.preempt_mode).upper()
    return (facts.preempt_type not in ("", "preempt/none")
            and ("REQUEUE" in mode or "CANCEL" in mode))


def sends_user_signal(facts: SiteFacts) -> bool:
    return "send_user_signal" in facts.extra.get("PreemptParameters", "")


__all__ = ["SlurmSite", "gpus_in", "parse_partition_lines", "parse_sinfo_pools", "preempts",
           "sends_user_signal"]
