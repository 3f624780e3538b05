"""Slurm: sbatch scripts, one batched squeue per tick, scancel."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Collection
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

from hpcdet.config import ExperimentConfig
from hpcdet.schedulers.base import (
    BatchOptions,
    JobRequest,
    JobStatus,
    Partition,
    Scheduler,
    SiteLimits,
    check_request,
)
from hpcdet.schedulers.templating import render, shq
from hpcdet.states import JobState

log = logging.getLogger(__name__)

_STATE_MAP = {
    "PENDING": JobState.PENDING,
    "CONFIGURING": JobState.PENDING,
    "REQUEUED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "BOOT_FAIL": JobState.NODE_FAIL,
    "DEADLINE": JobState.TIMEOUT,
    "SPECIAL_EXIT": JobState.FAILED,
    "REVOKED": JobState.CANCELED,
    "CANCELLED": JobState.CANCELED,
    "TIMEOUT": JobState.TIMEOUT,
    "PREEMPTED": JobState.PREEMPTED,
    "NODE_FAIL": JobState.NODE_FAIL,
}

# squeue's pending reasons (%r), in words.
_REASONS = {
    "Priority": "waiting for higher-priority jobs to start first",
    "Resources": "waiting for nodes or GPUs to become free",
    "JobArrayTaskLimit": "waiting: the search's max_concurrent_trials is reached",
    "BeginTime": "waiting for its start time (requeued jobs wait about two minutes)",
    "Dependency": "waiting for another job to finish",
    "DependencyNeverSatisfied": "can never start: the job it depends on failed",
    "ReqNodeNotAvail": "waiting: the nodes it needs are down, drained or reserved",
    "PartitionTimeLimit": "can never start: its walltime exceeds the partition's limit",
    "PartitionNodeLimit": "can never start: it asks for more nodes than the partition allows",
    "PartitionDown": "waiting: the partition is down",
    "PartitionInactive": "waiting: the partition is inactive",
    "JobHeldUser": "held by you (`scontrol release`)",
    "JobHeldAdmin": "held by an administrator",
    "QOSMaxJobsPerUserLimit": "waiting: you have the most running jobs your QOS allows",
    "QOSMaxSubmitJobPerUserLimit": "waiting: you have the most jobs your QOS allows",
    "AssocMaxJobsLimit": "waiting: your account's running-job limit is reached",
    "AssocGrpGRES": "waiting: your account's GPU limit is reached",
    "AssocGrpCpuLimit": "waiting: your account's CPU limit is reached",
    "QOSGrpGRES": "waiting: the QOS's GPU limit is reached",
    "NodeDown": "waiting: a node it needs is down",
    "Reservation": "waiting for a reservation",
    "Licenses": "waiting for licenses",
    "TimeLimit": "stopped: it reached its walltime",
}

# %S: a pending job's expected start (from the backfill scheduler; N/A until it has run), a
# running job's start. %Z: the working directory (--chdir). Directory and name last: either
# may contain "|", and hpcdet's own job names never do.
_SQUEUE_FORMAT = "%i|%T|%r|%N|%Q|%y|%P|%S|%Z|%j"


@lru_cache(maxsize=1024)  # the tasks of an array share their times, and the local zone is slow
def _timestamp(text: str) -> float | None:
    """squeue's times (local, ``2026-11-22T18:04:00``) as epoch seconds; None for N/A."""
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


# Most of a poll's lines are the last poll's again (a thousand held or running array tasks):
# each distinct line is parsed once.
@lru_cache(maxsize=1 << 14)
def _status_line(line: str) -> tuple[str, JobStatus] | None:
    """(job id, status) of one line of ``_SQUEUE_FORMAT``; None for a line of another shape."""
    parts = line.split("|", 8)
    if len(parts) < 9 or "|" not in parts[8]:
        return None
    job_id, native, reason, nodes, priority, nice, partition, start, rest = parts
    workdir, name = rest.rsplit("|", 1)
    state = _STATE_MAP.get(native)
    if state is None:
        log.warning("unknown Slurm job state %r for job %s", native, job_id)
        state = JobState.UNKNOWN
    return job_id, JobStatus(
        state, reason_in_words(reason), native, None, nodes, name,
        int(priority) if priority.lstrip("-").isdigit() else None,
        int(nice) if nice.lstrip("-").isdigit() else None,
        partition, _timestamp(start), workdir,
    )


def reason_in_words(code: str) -> str:
    if code in ("None", "", "(null)"):
        return ""
    return _REASONS.get(code, code)


def walltime(seconds: int) -> str:
    """Seconds as Slurm's D-HH:MM:SS (rounded up to whole minutes, Slurm's granularity)."""
    minutes = -(-seconds // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    return f"{days}-{hours:02d}:{mins:02d}:00"


def slurm_options(cfg: ExperimentConfig) -> BatchOptions:
    """The ``slurm:`` section (the local backend reads it too, for slots_per_node)."""
    s = cfg.slurm
    return BatchOptions("slurm", s.slots_per_node, s.walltime_seconds, s.partition, s.account,
                        s.qos, s.gpu_type, tuple(s.sbatch_args))


class SlurmScheduler(Scheduler):
    name: ClassVar[str] = "slurm"
    supports_arrays: ClassVar[bool] = True
    # sbatch (22.05) when slurmctld's job table is full (MaxJobCount: "Slurm temporarily
    # unable to accept job, sleeping and retrying", for about two minutes, then "Resource
    # temporarily unavailable"; both seen on the test cluster), when slurmctld is down or
    # answers late, and when a QOS or association MaxSubmitJobs limit is reached
    # ("QOSMaxSubmitJobPerUserLimit", "AssocMaxSubmitJobLimit"). Each clears as jobs end.
    transient_refusals: ClassVar[tuple[str, ...]] = (
        "temporarily unable to accept job", "Resource temporarily unavailable",
        "Socket timed out", "Unable to contact slurm controller",
        "Zero Bytes were transmitted or received", "MaxSubmitJob",
    )

    # sbatch (22.05) for a job laid over nodes or a partition the cluster no longer has (or
    # not yet: a daemon that read the site before a partition was added placed it blind).
    site_changed_refusals: ClassVar[tuple[str, ...]] = (
        "Requested node configuration is not available", "Invalid partition name specified",
    )

    def options(self, cfg: ExperimentConfig) -> BatchOptions:
        return slurm_options(cfg)

    def render_script(self, job: JobRequest) -> str:
        check_request(job)
        cpus = "" if job.gpus else f" --cpus-per-task={job.slots_per_node}"
        launch = (
            f"srun --nodes={job.num_nodes} --ntasks-per-node=1{cpus} --kill-on-bad-exit=1"
            " --export=ALL"
        )
        return render(
            "slurm.sbatch.j2",
            {
                "name": job.name,
                "run_dir": job.run_dir,
                "python": job.python,
                "num_nodes": job.num_nodes,
                "slots_per_node": job.slots_per_node,
                "gpus": job.gpus,
                "gpu_type": job.gpu_type,
                "partition": job.partition,
                "account": job.account,
                "qos": job.qos,
                "walltime": walltime(job.walltime_seconds) if job.walltime_seconds else None,
                "nice": job.nice,
                "preempt_grace_seconds": job.preempt_grace_seconds,
                "extra_args": job.extra_args,
                "environment": job.environment,
                "launch": launch,
                "job_id_var": "SLURM_JOB_ID",
                "array": job.array,
                "pilot": job.pilot,
                "deadline_after": job.deadline_after,
            },
            self.settings.get("template_dir"),
        )

    def submit_command(self, script: Path) -> list[str]:
        return ["sbatch", "--parsable", str(script)]

    def parse_job_id(self, stdout: str) -> str:
        # --parsable prints "<jobid>" or "<jobid>;<cluster>".
        first = stdout.strip().splitlines()[-1] if stdout.strip() else ""
        job_id = first.split(";")[0].strip()
        if not job_id.isdigit():
            raise ValueError(f'could not make sense of sbatch output "{stdout.strip()}"')
        return job_id

    def status_command(self, job_ids: Collection[str]) -> list[str]:
        # squeue --json ignores filters on 22.05 and dumps every user's jobs; --me and an
        # explicit format keep the answer small. One call covers all of our jobs.
        return ["squeue", "--me", "--noheader", "--array", "--states=all", "-o", _SQUEUE_FORMAT]

    def parse_status(self, stdout: str) -> dict[str, JobStatus]:
        result: dict[str, JobStatus] = {}
        for line in stdout.splitlines():
            parsed = _status_line(line.strip())
            if parsed is not None:
                result[parsed[0]] = parsed[1]
        return result

    def cancel_command(self, job_ids: Collection[str]) -> list[str]:
        return ["scancel", *sorted(job_ids)]

    def nice_command(self, job_ids: Collection[str], nice: int) -> list[str] | None:
        return ["scontrol", "update", f"jobid={','.join(sorted(job_ids))}", f"nice={nice}"]

    def move_command(self, job_ids: Collection[str], partition: str) -> list[str] | None:
        # Only pending jobs move. A partition the user may not use is still set, with the
        # error "Requested partition configuration not available now": check first
        # (probe_command) and move back on failure.
        return ["scontrol", "update", f"jobid={','.join(sorted(job_ids))}",
                f"partition={partition}"]

    def probe_command(self, script: Path, partition: str) -> list[str] | None:
        # Answers e.g. "allocation failure: User's group not permitted to use this partition".
        return ["sbatch", "--test-only", f"--partition={partition}", str(script)]

    def join_command(self, job_id: str, argv: list[str]) -> list[str] | None:
        # --overlap (Slurm 20.11+): the step shares the CPUs the job's first step holds.
        return ["srun", "--overlap", f"--jobid={job_id}", "--nodes=1", "--ntasks=1", "--pty",
                *argv]

    def hold_command(self, job_ids: Collection[str]) -> list[str] | None:
        return ["scontrol", "hold", ",".join(sorted(job_ids))]

    def release_command(self, job_ids: Collection[str]) -> list[str] | None:
        return ["scontrol", "release", ",".join(sorted(job_ids))]

    def limits_command(self) -> list[str] | None:
        return ["scontrol", "show", "config"]

    def parse_limits(self, stdout: str) -> SiteLimits:
        found = parse_config_limits(stdout)
        storage = found.get("AccountingStorageType", "")

        def number(key: str) -> int | None:
            return int(found[key]) if found.get(key, "").isdigit() else None

        return SiteLimits(number("MaxArraySize"), number("MaxJobCount"),
                          bool(storage) and not storage.endswith("/none"))

    def final_status_command(self, job_ids: Collection[str]) -> list[str] | None:
        # Finished jobs leave squeue after MinJobAge; only accounting remembers them.
        if not self.limits.accounting or not job_ids:
            return None
        return ["sacct", "-X", "-P", "-n", "-j", ",".join(sorted(job_ids)),
                "-o", "JobID,State,ExitCode,ElapsedRaw,AllocTRES"]

    def parse_final_status(self, stdout: str) -> dict[str, JobStatus]:
        result = {}
        for line in stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) < 3:
                continue
            job_id, native, code = parts[:3]
            native = native.split()[0] if native.strip() else ""  # "CANCELLED by 1000"
            state = _STATE_MAP.get(native, JobState.UNKNOWN)
            rc, _, sig = code.partition(":")
            exit_code = 128 + int(sig) if sig.isdigit() and int(sig) else (
                int(rc) if rc.isdigit() else None)
            elapsed, tres = (parts[3], parts[4]) if len(parts) >= 5 else ("", "")
            allocated = _tres(tres)
            result[job_id] = JobStatus(
                state, "", native, exit_code,
                used_seconds=float(elapsed) if elapsed.isdigit() else None,
                used_gpus=allocated.get("gres/gpu", 0 if tres else None),
                used_cpus=allocated.get("cpu"))
        return result

    def info_commands(self) -> list[list[str]]:
        return [
            ["sinfo", "-o", "%P|%a|%l|%D|%c|%G|%T|%C"],
            ["scontrol", "show", "config"],
        ]

    def partitions_command(self) -> list[str] | None:
        return ["sinfo", "--noheader", "-o", "%P|%D|%c|%G"]

    def parse_partitions(self, stdout: str) -> list[Partition]:
        found: dict[str, Partition] = {}
        for line in stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) != 4:
                continue
            name, nodes, cpus, gres = parts
            default = name.endswith("*")
            name = name.rstrip("*")
            # sinfo prints one line per node state: add the nodes up per partition.
            seen = found.get(name) or Partition(name, 0, 0)
            found[name] = Partition(
                name, seen.nodes + _leading_int(nodes), max(seen.cpus_per_node, _leading_int(cpus)),
                max(seen.gpus_per_node, _gpus(gres)), default or seen.default,
            )
        return list(found.values())

    def parse_info(self, outputs: list[str]) -> list[tuple[str, str]]:
        rows = []
        for p in parse_sinfo(outputs[0]):
            gres = "" if p["gres"] in ("(null)", "") else f", gres {p['gres']}"
            rows.append((
                f"partition {p['partition']}",
                f"{p['avail']}, {p['nodes']} nodes {p['state']}, {p['cpus']} CPUs per node"
                f"{gres}, time limit {p['timelimit']}; CPUs allocated/idle/other/total "
                f"{p['cpu_use']}",
            ))
        rows.extend(sorted(parse_config_limits(outputs[1]).items()))
        return rows


def _leading_int(text: str) -> int:
    digits = ""
    for ch in text:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else 0


def _gpus(gres: str) -> int:
    """GPUs per node from a gres string such as ``gpu:a100:4(S:0-1),shard:8``."""
    total = 0
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu":
            total += _leading_int(parts[-1]) if len(parts) > 1 else 1
    return total


def _tres(text: str) -> dict[str, int]:
    """sacct's AllocTRES, ``billing=4,cpu=4,gres/gpu:a100=2,gres/gpu=2,mem=16G,node=1``
    (sacct(1): the trackable resources allocated to the job), as counts: ``cpu`` and
    ``gres/gpu`` (typed GPUs only, when no untyped total is listed, summed into it)."""
    counts: dict[str, int] = {}
    typed = 0
    for item in text.split(","):
        key, _, value = item.partition("=")
        if not value.isdigit():
            continue
        if key.startswith("gres/gpu:"):
            typed += int(value)
        else:
            counts[key] = int(value)
    if typed and "gres/gpu" not in counts:
        counts["gres/gpu"] = typed
    return counts


def parse_sinfo(stdout: str) -> list[dict[str, str]]:
    # %C: the partition's CPUs by state, "allocated/idle/other/total" (sinfo(1)).
    keys = ["partition", "avail", "timelimit", "nodes", "cpus", "gres", "state", "cpu_use"]
    rows = []
    for line in stdout.splitlines()[1:]:
        parts = line.split("|")
        if len(parts) == len(keys):
            rows.append(dict(zip(keys, parts)))
    return rows


def parse_config_limits(stdout: str) -> dict[str, str]:
    """The site limits hpcdet cares about, from `scontrol show config`."""
    wanted = {"MaxArraySize", "MaxJobCount", "AccountingStorageType", "SchedulerParameters",
              "PriorityType", "SLURM_VERSION", "ClusterName"}
    out = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in wanted:
            out[key.strip()] = value.strip()
    return out


__all__ = ["SlurmScheduler", "parse_config_limits", "parse_sinfo", "reason_in_words", "shq"]
