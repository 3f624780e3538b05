"""Every error hpcdet raises for a user to read.

Messages say what went wrong and what to do about it; the CLI prints them without a traceback
and exits 1.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence


class HpcdetError(Exception):
    """Base of all hpcdet errors; ``str(err)`` is fit to show to a user as it is."""


class ConfigError(HpcdetError):
    """An experiment or cluster config is invalid; carries every problem, each with its path."""

    def __init__(self, problems: Sequence[str], source: str = "experiment config") -> None:
        self.problems = list(problems)
        self.source = source
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid {source} ({len(self.problems)} problem(s)):\n{lines}")


class ContextError(HpcdetError):
    """The context directory cannot be packed (too big, unreadable, missing)."""


class NotFoundError(HpcdetError):
    """An experiment, trial or checkpoint id that does not exist."""


class UsageError(HpcdetError):
    """A command line that cannot be carried out as written; the message shows the form."""


class StateError(HpcdetError):
    """An operation that the object's current state does not allow."""


class StoreError(HpcdetError):
    """The database failed; the run tree still holds everything, see `hpcdet daemon status`."""


class DaemonError(HpcdetError):
    """The per-user daemon cannot be reached or started."""


class SchedulerCommandError(HpcdetError):
    """A scheduler command (sbatch, squeue, scancel, ...) failed."""

    def __init__(
        self, cmd: Sequence[str], exit_code: int, stdout: str, stderr: str, transient: bool = False
    ) -> None:
        self.cmd = list(cmd)
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        self.transient = transient
        said = (stderr.strip() or stdout.strip() or "(no output)").splitlines()[-1]
        super().__init__(f"`{' '.join(self.cmd[:1])}` failed with exit code {exit_code}: {said}")


class ImageError(HpcdetError):
    """A trial's image cannot be had: no container runtime, no such image, a failed pull."""


class TrialClassError(HpcdetError):
    """A trial class (``entrypoint: module:Class``) cannot be loaded or lacks what the
    PyTorch API calls; the message names what to define."""


class SubmitError(HpcdetError):
    """The scheduler refused a submission; the message is the scheduler's reason."""


class DiskFullError(HpcdetError):
    """A write failed for lack of space or quota; what was half-written has been removed."""

    def __init__(self, what: str, error: BaseException, outcome: str = "") -> None:
        super().__init__(
            f"{outcome}{disk_full_reason(error)} while writing {what}; free space (or quota) "
            "on that filesystem and retry"
        )


def disk_full_reason(error: BaseException) -> str:
    """"no space left on device" or "disk quota exceeded", as the system said it."""
    cause = disk_full_cause(error)
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror.lower()
    return "no space left on device"


def _is_sqlite_disk_full(error: BaseException) -> bool:
    # Told by name: trial-side code imports this module and stays standard-library only, and
    # _sqlite3 is an optional extension that a cluster's or an image's Python may lack.
    kind = type(error)
    return (kind.__module__ == "sqlite3" and kind.__name__ == "OperationalError"
            and "disk is full" in str(error))


def disk_full_cause(error: BaseException | None) -> BaseException | None:
    """The ENOSPC/EDQUOT error (or SQLite's "disk is full") behind ``error``, if any."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return error
        if _is_sqlite_disk_full(error):
            return error
        error = error.__cause__ or error.__context__
    return None


class HostKeyError(HpcdetError):
    """An SSH host's key is unknown or not the one recorded: hpcdet connects to no such host."""


class RemoteAuthError(HpcdetError):
    """The login node (or a bastion) refused every way hpcdet had to authenticate."""
