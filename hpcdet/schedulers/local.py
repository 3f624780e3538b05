"""The local backend: the same harness in local processes (the default off-cluster)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import ClassVar

from hpcdet.config import ExperimentConfig
from hpcdet.private import hpcdet_command
from hpcdet.schedulers.base import BatchOptions, JobRequest, JobStatus, Scheduler, check_request
from hpcdet.schedulers.slurm import slurm_options
from hpcdet.schedulers.templating import render
from hpcdet.states import JobState

_STATE_MAP = {
    "PENDING": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "CANCELLED": JobState.CANCELED,
    "NODE_FAIL": JobState.NODE_FAIL,
}


class LocalScheduler(Scheduler):
    name: ClassVar[str] = "local"

    def options(self, cfg: ExperimentConfig) -> BatchOptions:
        # Off-cluster, slurm.slots_per_node and slurm.walltime still shape the run.
        return slurm_options(cfg)

    @property
    def jobs_dir(self) -> str:
        return str(self.settings["jobs_dir"])

    def join_command(self, job_id: str, argv: list[str]) -> list[str] | None:
        return argv  # the job runs on this host

    def _cmd(self, *args: str) -> list[str]:
        return [*hpcdet_command("hpcdet.schedulers.local_exec"), *args]

    def render_script(self, job: JobRequest) -> str:
        check_request(job, header=False)
        return render(
            "local.sh.j2",
            {
                "name": job.name,
                "run_dir": job.run_dir,
                "python": job.python,
                "environment": job.environment,
                "launch": "",
                "job_id_var": "HPCDET_LOCAL_JOB_ID",
                "pilot": job.pilot,
                "slots_per_node": job.slots_per_node,
                "deadline_after": job.deadline_after,
            },
            self.settings.get("template_dir"),
        )

    def submit_command(self, script: Path) -> list[str]:
        return self._cmd("submit", self.jobs_dir, str(script))

    def parse_job_id(self, stdout: str) -> str:
        job_id = stdout.strip()
        if not job_id.isdigit():
            raise ValueError(f'could not make sense of the local submit output "{job_id}"')
        return job_id

    def status_command(self, job_ids: Collection[str]) -> list[str]:
        return self._cmd("status", self.jobs_dir)

    def parse_status(self, stdout: str) -> dict[str, JobStatus]:
        result = {}
        for line in stdout.splitlines():
            job_id, native, code, name = (line.split("|", 3) + ["", "", ""])[:4]
            state = _STATE_MAP.get(native, JobState.UNKNOWN)
            exit_code = int(code) if code.lstrip("-").isdigit() else None
            result[job_id] = JobStatus(state, "", native, exit_code, "", name)
        return result

    def cancel_command(self, job_ids: Collection[str]) -> list[str]:
        return self._cmd("cancel", self.jobs_dir, *sorted(job_ids))

    def info_commands(self) -> list[list[str]]:
        return [["nproc"], ["cat", "/proc/loadavg"]]

    def parse_info(self, outputs: list[str]) -> list[tuple[str, str]]:
        # /proc/loadavg: "0.52 0.58 0.59 2/1104 31337" (proc(5)).
        load = outputs[1].split()
        return [("host CPUs", outputs[0].strip()),
                ("load average (1, 5, 15 min)", ", ".join(load[:3])),
                ("processes running / total", load[3] if len(load) > 3 else "")]
