"""The searcher contract: decisions are pure functions of the events fed so far.

The daemon journals every event it feeds to a searcher. Rebuilding a searcher after a restart
is ``Searcher.replay(events)``: it yields exactly the state, and from then on exactly the
decisions, of a searcher that was never interrupted. Searchers never read the clock, the
database or the filesystem; their only randomness is the experiment-seeded generator.

Trials are named by ``request_id``: 0, 1, 2, ... in creation order within the experiment.
The daemon maps request ids to trial ids and to job-array indices.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Union

# ---- decisions (searcher -> daemon) ---------------------------------------------------------


@dataclass(frozen=True)
class Create:
    """Create trial ``request_id`` with these hyperparameters and seed."""

    request_id: int
    hparams: dict[str, Any]
    trial_seed: int


@dataclass(frozen=True)
class ValidateAfter:
    """0.37 operation: train trial ``request_id`` to the absolute ``length``, then report."""

    request_id: int
    length: int


@dataclass(frozen=True)
class Close:
    """0.37: trial ``request_id`` gets no more operations; it completes."""

    request_id: int


@dataclass(frozen=True)
class Stop:
    """0.38: stop trial ``request_id`` early (hpcdet sends a preemption request)."""

    request_id: int


@dataclass(frozen=True)
class Shutdown:
    """The search is over. ``failure`` with ``message`` when the search itself failed;
    ``cancel`` when every trial was canceled (Determined's ``Shutdown.Cancel``)."""

    failure: bool = False
    message: str = ""
    cancel: bool = False


Action = Union[Create, ValidateAfter, Close, Stop, Shutdown]

# ---- events (daemon -> searcher) ------------------------------------------------------------


@dataclass(frozen=True)
class Initialize:
    """The experiment starts. Always the first event."""

    kind: str = field(default="initialize", init=False)


@dataclass(frozen=True)
class ValidationReported:
    """A trial called report_validation_metrics (0.38 ASHA reads metric and time_metric)."""

    request_id: int
    metrics: dict[str, Any]
    kind: str = field(default="validation", init=False)


@dataclass(frozen=True)
class OpCompleted:
    """0.37: a trial completed its operation of ``length`` with ``op.report_completed(metric)``."""

    request_id: int
    length: int
    metric: Any
    kind: str = field(default="op_completed", init=False)


# Why a trial ended, as the searcher needs to know it.
EXIT_COMPLETED = "completed"  # exited 0 (or was closed/stopped and then exited)
EXIT_ERRORED = "errored"  # failed and used up max_restarts
EXIT_INVALID_HP = "invalid_hp"  # raised det.InvalidHP
EXIT_USER_STOP = "user_stop"  # report_early_exit(USER_REQUESTED_STOP)
EXIT_CANCELED = "canceled"  # killed or canceled by the user


@dataclass(frozen=True)
class TrialExited:
    """Trial ``request_id`` is final (it will never run again)."""

    request_id: int
    reason: str
    kind: str = field(default="exited", init=False)


Event = Union[Initialize, ValidationReported, OpCompleted, TrialExited]
_EVENTS: dict[str, Any] = {
    "initialize": Initialize, "validation": ValidationReported, "op_completed": OpCompleted,
    "exited": TrialExited,
}


def event_to_dict(event: Event) -> dict[str, Any]:
    return asdict(event)


def event_from_dict(data: dict[str, Any]) -> Event:
    body = {k: v for k, v in data.items() if k != "kind"}
    event: Event = _EVENTS[data["kind"]](**body)
    return event
