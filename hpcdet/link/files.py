"""The daemon client over request files in the shared state directory (the CLI's half of the
protocol described in ``hpcdet.daemon.requests``): it works from every login node that sees
the shared filesystem and needs no open port."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

from hpcdet.daemon import operations as ops
from hpcdet.daemon import process
from hpcdet.daemon.requests import GONE, TAKEN, reply_path, request_path
from hpcdet.daemon.wake import ring
from hpcdet.errors import DaemonError, DiskFullError, HpcdetError, disk_full_cause
from hpcdet.link import Created, JobUpdate
from hpcdet.paths import StatePaths
from hpcdet.rundir.atomic import read_json, write_atomic
from hpcdet.snapshot import Snapshot


class FileClient:
    def __init__(self, paths: StatePaths) -> None:
        self.paths = paths

    def ping(self) -> dict[str, Any]:
        result: dict[str, Any] = self._send(ops.Ping())
        return result

    def shutdown(self) -> str:
        return str(self._send(ops.Shutdown()))

    def create(self, config: dict[str, Any], context: Path,
               on_snapshot: Callable[[int, int], None] | None = None,
               warn: Callable[[str], None] | None = None, paused: bool = False,
               includes: Sequence[Path] = (), convert_image: bool = False) -> Created:
        """The snapshot goes into the request area, where the daemon moves it into the
        experiment; a create given up on (a timeout, Ctrl-C) is withdrawn or left to the
        daemon, never half done (``give_up``)."""
        rid = new_request_id()
        staging = self.paths.requests / f"{rid}.context"
        try:
            taken = Snapshot(staging, warn)
            taken.context(context)
            for extra in includes:
                taken.include(extra)
            if on_snapshot is not None:
                on_snapshot(taken.files, taken.bytes)
            # Trials run with the python3 the user has at hand, unless the config says otherwise.
            python = shutil.which("python3") or ""
            reply = self._send(ops.Create(config, str(staging), rid, python, paused,
                                          convert_image), request_id=rid)
        except BaseException as e:
            outcome = give_up(self.paths, rid, staging, e)
            if outcome is e:
                raise
            if isinstance(outcome, BaseException):
                raise outcome from e
            reply = outcome  # answered as the CLI gave up
        return Created.from_reply(reply)

    def pause(self, exp_id: int) -> str:
        return str(self._send(ops.Pause(exp_id)))

    def activate(self, exp_id: int) -> str:
        return str(self._send(ops.Activate(exp_id)))

    def cancel(self, exp_id: int) -> str:
        return str(self._send(ops.Cancel(exp_id)))

    def kill(self, exp_id: int) -> str:
        return str(self._send(ops.Kill(exp_id)))

    def continue_experiment(self, exp_id: int, config: dict[str, Any] | None = None) -> str:
        return str(self._send(ops.Continue(exp_id, config)))

    def continue_trial(self, trial_id: int) -> Created:
        return Created.from_reply(self._send(ops.ContinueTrial(trial_id)))

    def delete_checkpoint(self, uuid: str) -> str:
        return str(self._send(ops.DeleteCheckpoint(uuid)))

    def set_experiment(self, exp_id: int, field: str, value: Any) -> str:
        return str(self._send(ops.SetExperiment(exp_id, field, value)))

    def delete_experiment(self, exp_id: int) -> str:
        return str(self._send(ops.DeleteExperiment(exp_id)))

    def kill_trial(self, trial_id: int) -> str:
        return str(self._send(ops.KillTrial(trial_id)))

    def update_jobs(self, updates: list[JobUpdate]) -> str:
        body = [{"job": u.experiment_id, "field": u.field, "value": u.value} for u in updates]
        return str(self._send(ops.UpdateJobs(body)) or "")

    def _send(self, operation: ops.Operation, request_id: str | None = None) -> Any:
        op, args = ops.encode(operation)
        return call(self.paths, op, args, request_id=request_id)


def call(
    paths: StatePaths, op: str, args: dict[str, Any], timeout: float | None = None,
    request_id: str | None = None,
) -> Any:
    """Send a request to the daemon, starting it first when it runs nowhere."""
    if timeout is None:
        timeout = float(os.environ.get("HPCDET_REQUEST_TIMEOUT", "120"))
    current = process.info(paths)
    if not current.alive:
        current = process.start(paths)
    where = f"host {current.record.get('host')}, pid {current.record.get('pid')}"
    rid = submit(paths, op, args, request_id)
    if current.here:
        ring(paths)
    try:
        return wait_reply(paths, rid, timeout, where)
    except HpcdetError as e:
        other = current.other_version()
        if other is None or type(e) is not HpcdetError:
            raise
        raise HpcdetError(f"{e}\n({other})") from None


def new_request_id() -> str:
    return f"{time.time():.6f}-{uuid.uuid4().hex[:8]}"


def submit(paths: StatePaths, op: str, args: dict[str, Any], request_id: str | None = None) -> str:
    rid = request_id or new_request_id()
    write_atomic(request_path(paths, rid), {"op": op, "args": args, "pid": os.getpid()})
    return rid


# A woken daemon answers most requests within tens to hundreds of milliseconds, which the
# CLI's user waits through: for the first REPLY_SOON seconds the reply is looked for every
# REPLY_SOON_PAUSE (a look is one failed open, ~10 us), then every REPLY_PAUSE.
REPLY_SOON = 1.0
REPLY_SOON_PAUSE = 0.005
REPLY_PAUSE = 0.05


def wait_reply(paths: StatePaths, rid: str, timeout: float, where: str) -> Any:
    path = reply_path(paths, rid)
    started = time.monotonic()
    deadline = started + timeout
    while time.monotonic() < deadline:
        reply = read_json(path)
        if reply is not None:
            path.unlink(missing_ok=True)
            if reply["ok"]:
                return reply["result"]
            raise HpcdetError(reply["error"])
        soon = time.monotonic() - started < REPLY_SOON
        time.sleep(REPLY_SOON_PAUSE if soon else REPLY_PAUSE)
    if (paths.requests / f"{rid}{TAKEN}").exists():
        raise DaemonError(
            f"the hpcdet daemon ({where}) took the request but did not answer within "
            f"{timeout:.0f} s (a full disk keeps it from writing its answer). The request is "
            "carried out once at most: see `hpcdet experiment list` and `hpcdet daemon status`."
        )
    raise DaemonError(
        f"the hpcdet daemon ({where}) did not answer within {timeout:.0f} s. "
        "See `hpcdet daemon status`; the request stays queued and will be answered when the "
        "daemon runs again."
    )


def withdraw(paths: StatePaths, rid: str) -> bool:
    """Take back a request the daemon has not taken yet; True when it was (so it never runs)."""
    try:
        request_path(paths, rid).unlink()
    except FileNotFoundError:
        return False
    return True


def taken(paths: StatePaths, rid: str) -> bool:
    """Whether the daemon took the request: it carries it out, answered yet or not."""
    # The taken mark first: the daemon writes the reply before it drops the mark.
    return (paths.requests / f"{rid}{TAKEN}").exists() or reply_path(paths, rid).exists()


def abandon(paths: StatePaths, rid: str) -> dict[str, Any] | None:
    """Stop waiting for a request the daemon took; returns its reply when it came meanwhile."""
    mark = paths.requests / f"{rid}{GONE}"
    try:
        mark.touch()
    except OSError:
        return None  # a full disk: the reply file stays, as it did before
    path = reply_path(paths, rid)
    reply: dict[str, Any] | None = read_json(path)
    if reply is not None:
        path.unlink(missing_ok=True)
        mark.unlink(missing_ok=True)
    return reply


def give_up(
    p: StatePaths, rid: str, staging: Path, e: BaseException
) -> BaseException | dict[str, Any]:
    """What a create that ended without an answer raises, or the daemon's result when it came
    meanwhile. The snapshot is removed only when the daemon never acts on the request: once
    taken, it is the daemon's to move into the experiment or remove."""
    withdrawn = withdraw(p, rid)
    if not withdrawn and taken(p, rid):
        reply = abandon(p, rid)
        if reply is not None:
            return reply["result"] if reply["ok"] else HpcdetError(reply["error"])
        if not isinstance(e, DaemonError):
            return e
        return DaemonError(
            "the hpcdet daemon took the request but has not answered yet; it keeps the "
            "context and creates the experiment, or logs why not in daemon.log. See "
            "`hpcdet experiment list` in a while, and `hpcdet daemon status`.")
    shutil.rmtree(staging, ignore_errors=True)
    if withdrawn and isinstance(e, DaemonError):
        return DaemonError("the hpcdet daemon did not take the request in time; it was "
                           "withdrawn and no experiment was created. See `hpcdet daemon "
                           "status`.")
    if isinstance(e, OSError) and disk_full_cause(e) is not None:
        return DiskFullError(f"the request and context snapshot in {p.requests}", e,
                             "experiment not created: ")
    return e
