"""The files of one run's directory and of an experiment's array directory::

    runs/exp-<E>/array/array<N>.sh            the batch script of the experiment's N-th job array
    runs/exp-<E>/array/slot-<R>               names the run directory of search request R, for
                                              the array task that runs it (atomic replace)
    runs/exp-<E>/array/closed                 no slot will be filled any more: a task still
                                              waiting for one exits (the experiment stopped)
    runs/exp-<E>/trials/<T>/run-<R>/          one directory per submission of trial T:
        job.json       the run spec: what the harness needs (written before submit)
        job.sh         the rendered batch script
        control.json   daemon -> trial: carry on, or checkpoint and exit (atomic replace)
        preempt        harness -> trial, created when the scheduler signals preemption
        kill           daemon -> batch script, harness and trial: the run is being killed, so
                       the SIGTERM that follows ends it at once instead of asking it to
                       checkpoint (and, of a packed run, its pilot ends it alone)
        events.jsonl   trial -> daemon event log (append-only, sequence numbers)
        nodes/         per node: its address (<rank>.addr), cluster info (<rank>.json), the
                       harness's exit code (<rank>.exit) and, with a startup-hook.sh, whether
                       it finished (<rank>.hook-ok) or the exit code it failed with
                       (<rank>.hook-failed), or why the trial could not start there
                       (<rank>.launch-failed); the directory exists once the job has started
        logs/          per node: the entrypoint's output (node-<rank>.log)
        exit.json      how the job ended, written by the batch script
    runs/bell/<E>.<T>.<R>                     rung by run R of trial T of experiment E when it
                                              writes what the daemon decides on, or has ended:
                                              the daemon looks at that run at its next tick
                                              instead of its next sweep of every live run

The experiment's directory itself is ``hpcdet.paths.StatePaths.experiment``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

RUN_SPEC_FILE = "job.json"
SCRIPT_FILE = "job.sh"
CONTROL_FILE = "control.json"  # daemon -> trial
PREEMPT_FILE = "preempt"  # harness -> trial, on SIGUSR2/SIGTERM
KILL_FILE = "kill"  # daemon -> batch script, harness, trial, pilot: a SIGTERM now is a kill
ARRAY_CLOSED = "closed"  # daemon -> array tasks still waiting for a slot
EVENTS_FILE = "events.jsonl"  # trial -> daemon
NODES_DIR = "nodes"
LOGS_DIR = "logs"
EXIT_FILE = "exit.json"  # batch script -> daemon
ARRAY_DIR = "array"
BELL_DIR = "bell"  # beside the experiments' directories, runs/exp-<E>


class RunFiles(NamedTuple):
    """What the daemon's loop looks at in each live run's directory on every tick, as strings:
    a thousand live runs make a thousand looks at each a second, and a Path built per look
    cost more than the look."""

    events: str
    exit: str
    control: str
    nodes: str  # made when the job has started (a harness has entered the rendezvous)


@lru_cache(maxsize=1 << 14)
def run_files(run_dir: Path) -> RunFiles:
    return RunFiles(*(f"{run_dir}/{name}" for name in (EVENTS_FILE, EXIT_FILE, CONTROL_FILE,
                                                        NODES_DIR)))


def node_address(run_dir: Path, rank: int) -> Path:
    return run_dir / NODES_DIR / f"{rank}.addr"


def node_info(run_dir: Path, rank: int) -> Path:
    return run_dir / NODES_DIR / f"{rank}.json"


def node_exit(run_dir: Path, rank: int) -> Path:
    """The harness's exit code on that node, for a batch script whose node launcher does not
    pass it on (PBS's pbsdsh exits 0 whatever its tasks did)."""
    return run_dir / NODES_DIR / f"{rank}.exit"


def node_hook_ok(run_dir: Path, rank: int) -> Path:
    return run_dir / NODES_DIR / f"{rank}.hook-ok"


def node_hook_failed(run_dir: Path, rank: int) -> Path:
    return run_dir / NODES_DIR / f"{rank}.hook-failed"


def hook_failure(run_dir: Path) -> int | None:
    """The exit code ``startup-hook.sh`` failed with on any node of the run, or None."""
    for path in sorted((run_dir / NODES_DIR).glob("*.hook-failed")):
        text = path.read_text().strip()
        if text.lstrip("-").isdigit():
            return int(text)
    return None


def node_started(run_dir: Path, rank: int) -> Path:
    """Made by the container's first command on that node: what failed after it is the
    trial's, what failed before it the container runtime's."""
    return run_dir / NODES_DIR / f"{rank}.started"


def node_launch_failed(run_dir: Path, rank: int) -> Path:
    """Why the trial could not start on that node (its image or container runtime)."""
    return run_dir / NODES_DIR / f"{rank}.launch-failed"


def launch_failure(run_dir: Path) -> str | None:
    for path in sorted((run_dir / NODES_DIR).glob("*.launch-failed")):
        return path.read_text().strip() or None
    return None


def node_log(run_dir: Path, rank: int) -> Path:
    return run_dir / LOGS_DIR / f"node-{rank}.log"


def node_logs(run_dir: Path) -> list[Path]:
    return sorted((run_dir / LOGS_DIR).glob("node-*.log"))


def array_dir(exp_dir: Path) -> Path:
    return exp_dir / ARRAY_DIR


def array_script(exp_dir: Path, index: int) -> Path:
    return exp_dir / ARRAY_DIR / f"array{index}.sh"


def array_scripts(exp_dir: Path) -> list[Path]:
    return sorted((exp_dir / ARRAY_DIR).glob("array*.sh"))


def array_slot(exp_dir: Path, request_id: int) -> Path:
    return exp_dir / ARRAY_DIR / f"slot-{request_id}"


def array_closed(exp_dir: Path) -> Path:
    """Written when the experiment stops or ends: an array task that starts, or still waits,
    without a slot then exits instead of holding its allocation for a trial that never comes
    (the batch system starts pending tasks whenever it likes, daemon or not)."""
    return exp_dir / ARRAY_DIR / ARRAY_CLOSED


def bell(run_dir: Path) -> Path:
    """The run's ring in the daemon's bell (``runs/bell/<E>.<T>.<R>``)."""
    trial_dir = run_dir.parent
    exp_dir = trial_dir.parent.parent
    return exp_dir.parent / BELL_DIR / (
        f"{exp_dir.name.removeprefix('exp-')}.{trial_dir.name}.{run_dir.name.removeprefix('run-')}")


def parse_ring(name: str) -> tuple[int, int, int] | None:
    """(experiment, trial, run) of a ring's file name; None for any other name."""
    parts = name.split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return None
    exp_id, trial_id, run_id = map(int, parts)
    return exp_id, trial_id, run_id


def tensorboard_dir(storage: Path, cluster_id: str, exp_id: int, trial_id: int | None = None
                    ) -> Path:
    """Where trials write TensorBoard files, beside the checkpoints in their storage (the
    layout Determined uses): the experiment's directory, or one trial's."""
    exp_dir = storage / cluster_id / "tensorboard" / "experiment" / str(exp_id)
    return exp_dir if trial_id is None else exp_dir / "trial" / str(trial_id)


def service(run_dir: Path) -> Path:
    """Where a notebook's JupyterLab says it listens (host, port, token, base_url): written by
    ``hpcdet.launch.notebook`` once it answers, 0600 (the token opens it)."""
    return run_dir / "service.json"


def shell_rc(run_dir: Path) -> Path:
    """A shell task's environment as bash sources it (``hpcdet.launch.hold``): what a shell
    joining the allocation starts with, 0600 (the trial's variables may be secrets)."""
    return run_dir / "shell.rc"


# A pilot allocation of a packed search (hpcdet.launch.pilot, hpcdet.daemon.packing): its
# directory beside the experiment's arrays (whose closed file it reads too), where the daemon
# hands it runs (``take/<E>.<T>.<R>``, the run directory inside), the job id the daemon got
# for it, and the status it keeps while it runs.
PILOT_TAKE, PILOT_STATUS, PILOT_JOB = "take", "status.json", "job_id"
PACKED = "+"


def pilot_dir(exp_dir: Path, index: int) -> Path:
    return exp_dir / ARRAY_DIR / f"pilot-{index}"


def pilot_dirs(exp_dir: Path) -> list[Path]:
    """The experiment's pilots' directories, by index."""
    found = (exp_dir / ARRAY_DIR).glob("pilot-*")
    return sorted((p for p in found if p.name[6:].isdigit()), key=lambda p: int(p.name[6:]))


def packed_id(pilot_job: str, exp_id: int, trial_id: int, run_id: int) -> str:
    """The job id of a run in a pilot: the pilot's, and the run."""
    return f"{pilot_job}{PACKED}{exp_id}.{trial_id}.{run_id}"


def pilot_of(job_id: str) -> str | None:
    """The pilot's job id of a packed run's job id; None for any other job id."""
    return job_id.split(PACKED, 1)[0] if PACKED in job_id else None


def packed_run(job_id: str) -> tuple[int, int, int] | None:
    """(experiment, trial, run) of a packed run's job id; None for any other job id."""
    parts = job_id.split(PACKED, 1)[1].split(".") if PACKED in job_id else []
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    exp_id, trial_id, run_id = map(int, parts)
    return exp_id, trial_id, run_id
