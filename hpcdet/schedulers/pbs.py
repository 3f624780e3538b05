"""PBS Pro / OpenPBS: ``#PBS`` scripts (``-J`` arrays), qstat's JSON, qdel, qhold/qrls, qalter.

The parsers are in ``pbs_status``; this module builds the commands and renders the script.
Facts: OpenPBS man pages qsub.1B, qstat.1B, qalter.1B, qmove.1B (cited where used).
"""

from __future__ import annotations

import dataclasses
import getpass
from collections.abc import Collection
from pathlib import Path
from typing import Any, ClassVar

from hpcdet.config import ExperimentConfig
from hpcdet.schedulers import pbs_ids, pbs_status
from hpcdet.schedulers.base import (
    BatchOptions,
    JobRequest,
    JobStatus,
    Partition,
    Scheduler,
    SiteLimits,
    check_request,
)
from hpcdet.schedulers.templating import render

# qalter.1B -p: the range of a job's Priority.
PRIORITY_RANGE = (-1024, 1023)
# qstat.1B: the exit status when an id it was given is not (or no longer) known; the others
# are still printed.
UNKNOWN_JOB_EXIT = 153


def walltime(seconds: int) -> str:
    """Seconds as PBS's HH:MM:SS."""
    hours, rest = divmod(seconds, 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def select(num_nodes: int, slots_per_node: int, gpus: bool) -> str:
    """The chunk request: one chunk per node holding all its slots, one MPI process each (the
    harness); slots are GPUs where the queue has GPUs, else CPUs."""
    per_chunk = (f"ncpus={slots_per_node}:ngpus={slots_per_node}" if gpus
                 else f"ncpus={slots_per_node}")
    return f"select={num_nodes}:{per_chunk}:mpiprocs=1"


def priority_of(nice: int) -> int:
    """Slurm-style nice (higher: later) as PBS's Priority (higher: sooner), within range."""
    low, high = PRIORITY_RANGE
    return max(low, min(high, -nice))


class PbsScheduler(Scheduler):
    name: ClassVar[str] = "pbs"
    supports_arrays: ClassVar[bool] = True
    # Priority is the nice's negative and has 1024 steps below 0: priority 99 is -570.
    nice_per_step: ClassVar[int] = 10
    # qsub (OpenPBS's messages; no real PBS here to confirm them) when the server's or a
    # queue's max_queued limit is reached ("would exceed queue workq's per-user limit of jobs
    # in 'Q' state", "Maximum number of jobs already in queue") or the server is unreachable.
    transient_refusals: ClassVar[tuple[str, ...]] = (
        "would exceed", "Maximum number of jobs already in", "cannot connect to server",
        "Connection refused",
    )

    # Measured, OpenPBS 23.06.06: root's qsub exits 175 with this unless the server lists root.
    refusal_advice: ClassVar[tuple[tuple[str, str], ...]] = (
        ("Bad UID for job execution",
         "PBS runs no job as root unless the server's acl_roots lists root (qmgr -c 'set "
         "server acl_roots += root'): run hpcdet as your own user"),
    )

    def options(self, cfg: ExperimentConfig) -> BatchOptions:
        p = cfg.pbs
        return BatchOptions("pbs", p.slots_per_node, p.walltime_seconds, p.queue, p.account,
                            None, None, tuple(p.pbsbatch_args))

    def render_script(self, job: JobRequest) -> str:
        check_request(job)
        limit = job.walltime_seconds
        return render(
            "pbs.j2",
            {
                "name": job.name,
                "run_dir": job.run_dir,
                "python": job.python,
                "num_nodes": job.num_nodes,
                "select": select(job.num_nodes, job.slots_per_node, job.gpus),
                "partition": job.partition,
                "account": job.account,
                "walltime": walltime(limit) if limit else None,
                "deadline_after": job.deadline_after,
                "priority": priority_of(job.nice) if job.nice else None,
                "extra_args": job.extra_args,
                "environment": job.environment,
                "launch": "on_every_node" if job.num_nodes > 1 else "",
                "job_id_var": "PBS_JOBID",
                "array": job.array,
                "pilot": job.pilot,
                "slots_per_node": job.slots_per_node,
            },
            self.settings.get("template_dir"),
        )

    def submit_command(self, script: Path) -> list[str]:
        return ["qsub", str(script)]

    def parse_job_id(self, stdout: str) -> str:
        return pbs_ids.parse_qsub_output(stdout)

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        super().__init__(settings)
        # Servers before PBS Pro 18 have no -F json: the first refusal turns it off.
        self.json = True
        # Whose jobs the status query keeps (qstat lists every user's).
        self.user = getpass.getuser()

    def _format(self) -> list[str]:
        return ["-F", "json"] if self.json else []

    def status_command(self, job_ids: Collection[str]) -> list[str]:
        # One call for all queued and running jobs, subjobs included (-t), kept to the user's
        # by Job_Owner: with -u, 23.06 prints its text table and a JSON without the jobs
        # (exit 0; fixed after 23.06, openpbs #2676). Jobs that have left it are asked about
        # by id, in history (final_status_command): a second call in the ticks where some
        # have.
        return ["qstat", "-f", *self._format(), "-t"]

    def parse_status(self, stdout: str) -> dict[str, JobStatus]:
        # The queue order is kept as nice values (hpcdet.priority): PBS's Priority, negated.
        # qstat lists jobs in queue order; qorder can exchange the places of queued jobs and
        # arrays, not of subjobs (qorder.1B).
        found = {}
        for place, (job_id, s) in enumerate(self._parse(stdout, self.user).items()):
            orderable = s.native == "Q" and self.array_of(job_id) == job_id
            found[job_id] = dataclasses.replace(
                s, nice=None if s.priority is None else -s.priority,
                position=place if orderable else None)
        return found

    def answered(self, exit_code: int, stderr: str) -> bool:
        """Also learns, from qstat refusing ``-F``, to ask in plain ``qstat -f`` next time."""
        if exit_code != 0 and "invalid option -- 'F'" in stderr:  # getopt's words
            self.json = False
        return exit_code == 0 or (exit_code == UNKNOWN_JOB_EXIT and "Unknown Job Id" in stderr)

    def final_status_command(self, job_ids: Collection[str]) -> list[str] | None:
        # -x: finished jobs too, while the server keeps history (job_history_enable).
        if not job_ids:
            return None
        return ["qstat", "-f", *self._format(), "-x", "-t", *sorted(job_ids)]

    def parse_final_status(self, stdout: str) -> dict[str, JobStatus]:
        return self._parse(stdout, None)

    @staticmethod
    def _parse(stdout: str, owner: str | None) -> dict[str, JobStatus]:
        if stdout.lstrip().startswith("Job Id:"):
            return pbs_status.parse_qstat_text(stdout, owner)
        return pbs_status.parse_qstat_json(stdout, owner)

    def cancel_command(self, job_ids: Collection[str]) -> list[str]:
        return ["qdel", *sorted(job_ids)]

    def nothing_to_cancel(self, exit_code: int, stderr: str) -> bool:
        # 23.06.06: "qdel: Job has finished 6.pbshead" (35), "qdel: Unknown Job Id 9.s"
        # (153), a line per such id; the others named are deleted all the same.
        lines = [line for line in stderr.splitlines() if line.strip()]
        return exit_code in (35, UNKNOWN_JOB_EXIT) and bool(lines) and all(
            "Job has finished" in line or "Unknown Job Id" in line for line in lines)

    def array_task_id(self, job_id: str, index: int) -> str:
        return pbs_ids.subjob_id(job_id, index)

    def array_of(self, job_id: str) -> str:
        try:
            return pbs_ids.array_id(job_id)
        except ValueError:
            return job_id

    def job_number(self, job_id: str) -> int:
        try:
            return int(pbs_ids.job_number(job_id))
        except ValueError:
            return 0

    def nice_command(self, job_ids: Collection[str], nice: int) -> list[str] | None:
        # qalter.1B -p: a job's Priority, which a user may set on their own queued jobs.
        return ["qalter", "-p", str(priority_of(nice)), *sorted(job_ids)]

    def order_command(self, first: str, second: str) -> list[str] | None:
        # qorder.1B: both queued, both the user's; their places are exchanged, nothing else.
        return ["qorder", first, second]

    def join_refused(self) -> str:
        # OpenPBS has no step inside a running job from outside it; `qsub -I` is a new job.
        return ("PBS cannot start a shell inside a running job: `qsub -I` asks for a new "
                "interactive job, and `ssh` to the job's first node (`qstat -f JOB`, "
                "exec_host) works where the site allows it")

    def hold_command(self, job_ids: Collection[str]) -> list[str] | None:
        return ["qhold", "-h", "u", *sorted(job_ids)]

    def release_command(self, job_ids: Collection[str]) -> list[str] | None:
        return ["qrls", "-h", "u", *sorted(job_ids)]

    def move_command(self, job_ids: Collection[str], partition: str) -> list[str] | None:
        # qmove.1B: queued jobs only; a running job is refused ("Request invalid for state").
        return ["qmove", partition, *sorted(job_ids)]

    def nodes_command(self) -> list[str] | None:
        return ["pbsnodes", "-a", "-F", "json"]

    def parse_nodes(self, stdout: str) -> Partition | None:
        return pbs_status.parse_pbsnodes(stdout)

    def limits_command(self) -> list[str] | None:
        return ["qmgr", "-c", "list server"]

    def parse_limits(self, stdout: str) -> SiteLimits:
        found = pbs_status.parse_qmgr_server(stdout)

        def number(key: str) -> int | None:
            return int(found[key]) if found.get(key, "").isdigit() else None

        return SiteLimits(number("max_array_size"), number("max_queued"),
                          found.get("job_history_enable", "").lower() == "true")

    def info_commands(self) -> list[list[str]]:
        return [["qmgr", "-c", "list server"]]

    def parse_info(self, outputs: list[str]) -> list[tuple[str, str]]:
        return sorted(pbs_status.parse_qmgr_server(outputs[0]).items())
