"""What a search will use, before `experiment create` sends it: the searcher's plan
(``hpcdet.search.estimate``) times its trials' slots, in hours where completed trials of
earlier experiments of the same name and unit of length say how long a unit takes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpcdet.records import RunRecord, TrialRecord
from hpcdet.search.estimate import Plan, plan
from hpcdet.states import TrialState
from hpcdet.views import usage

if TYPE_CHECKING:
    from hpcdet.config import ExperimentConfig
    from hpcdet.store.reads import Reads


_ONE = {"batches": "batch", "epochs": "epoch", "records": "record"}


@dataclass(frozen=True)
class Speed:
    seconds_per_unit: float
    trials: int  # completed trials it was measured on
    experiments: int


@dataclass(frozen=True)
class Estimate:
    name: str
    plan: Plan
    slots: int  # a trial's (a CPU trial counts as one)
    unit: str  # "GPU-hours" or "slot-hours"
    speed: Speed | None

    @property
    def hours(self) -> float | None:
        """The plan's slot-hours at the measured speed; None without one."""
        if self.speed is None or self.plan.units is None:
            return None
        return self.plan.units * self.speed.seconds_per_unit * self.slots / 3600

    def lines(self) -> list[str]:
        p, each = self.plan, f"{self.slots} {'GPU' if self.unit == 'GPU-hours' else 'slot'}"
        each += "s" * (self.slots > 1)
        if p.units is None:
            return [f"This search runs at most {p.trials} trial{'s' * (p.trials > 1)} of "
                    f"{each} each, of a length the trials decide: no estimate of its hours."]
        said = (f"This search runs at most {p.trials} trial{'s' * (p.trials > 1)} of {each} "
                f"each, {p.units} {p.unit} in all as the searcher plans them "
                f"(at most {p.length} a trial).")
        if self.speed is None or self.hours is None:
            return [said, f"No completed trial of an experiment named {self.name!r} (with "
                          f"lengths in {p.unit}) says how long one takes: no estimate of "
                          "its hours."]
        s = self.speed
        return [said, f"About {self.hours:.1f} {self.unit}, at {s.seconds_per_unit:.3g} s "
                      f"per {_ONE.get(p.unit, p.unit)} measured on {s.trials} completed "
                      f"trial{'s' * (s.trials > 1)} of {s.experiments} earlier "
                      f"experiment{'s' * (s.experiments > 1)} named {self.name!r}."]


def estimate(config: ExperimentConfig, reads: Reads | None) -> Estimate:
    """The estimate of a validated config; ``reads`` (None: no database yet) gives the speed
    of earlier experiments' completed trials."""
    planned = plan(config.searcher, config.hyperparameters)
    slots = config.resources.slots_per_trial
    speed = measured_speed(reads, config.name, planned.unit) if reads is not None else None
    return Estimate(config.name, planned, max(slots, 1), usage.unit(slots), speed)


def measured_speed(reads: Reads, name: str, unit: str) -> Speed | None:
    """Seconds per unit of length of the completed trials of experiments named ``name`` whose
    searcher measured lengths in ``unit``: their runs' seconds (the scheduler's, or the run
    tree's) over the lengths they completed."""
    seconds, units, trials, experiments = 0.0, 0, 0, 0
    for exp in reads.experiments():
        if exp.name != name or _unit(exp.stored_config) != unit:
            continue
        found = _measured(reads.trials(exp.id), reads.experiment_runs(exp.id),
                          _length(exp.stored_config))
        if found[2]:
            experiments += 1
            seconds, units, trials = seconds + found[0], units + found[1], trials + found[2]
    if not trials or units <= 0 or seconds <= 0:
        return None
    return Speed(seconds / units, trials, experiments)


def _unit(config: dict[str, Any]) -> str:
    searcher = config.get("searcher", {})
    length = searcher.get("max_length")
    if isinstance(length, dict) and length:
        return str(next(iter(length)))
    return str(searcher.get("time_metric") or "units")


def _length(config: dict[str, Any]) -> int:
    """The length a trial of the stored config's searcher runs to (0: the trial decides)."""
    searcher = config.get("searcher", {})
    length = searcher.get("max_time") if searcher.get("time_metric") else \
        searcher.get("max_length")
    if isinstance(length, dict) and length:
        length = next(iter(length.values()))
    return length if isinstance(length, int) else 0


def _measured(trials: Sequence[TrialRecord], runs: Sequence[RunRecord], length: int
              ) -> tuple[float, int, int]:
    """(seconds, units, trials) of the trials that completed their length (the searcher's
    last operation, or the searcher's length; not one stopped early) whose every run has its
    seconds."""
    by_trial: dict[int, list[RunRecord]] = {}
    for run in runs:
        by_trial.setdefault(run.trial_id, []).append(run)
    seconds, units, count = 0.0, 0, 0
    for t in trials:
        done = t.ops[-1] if t.ops else length
        spans = [_seconds(r) for r in by_trial.get(t.id, [])]
        if t.state != TrialState.COMPLETED or t.stop_requested or t.early_exit or done <= 0 \
                or not spans or None in spans:
            continue
        seconds += sum(s for s in spans if s is not None)
        units += done
        count += 1
    return seconds, units, count


def _seconds(run: RunRecord) -> float | None:
    if run.used_seconds is not None and run.usage_by:
        return run.used_seconds
    if run.started is not None and run.ended is not None:
        return max(0.0, run.ended - run.started)
    return None
