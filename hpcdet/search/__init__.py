"""Hyperparameter search: pure functions of the events fed so far (see ``base``).

``Searcher(config, hyperparameters, experiment_seed)`` is the one object the daemon uses: it is
fed ``Initialize`` and then trial events, and returns decisions (``Create``, ``ValidateAfter``,
``Close``, ``Stop``, ``Shutdown``).
"""

from hpcdet.search.base import (
    EXIT_CANCELED,
    EXIT_COMPLETED,
    EXIT_ERRORED,
    EXIT_INVALID_HP,
    EXIT_USER_STOP,
    Action,
    Close,
    Create,
    Event,
    Initialize,
    OpCompleted,
    Shutdown,
    Stop,
    TrialExited,
    ValidateAfter,
    ValidationReported,
    event_from_dict,
    event_to_dict,
)
from hpcdet.search.rng import MT19937
from hpcdet.search.searcher import SEARCH_METHODS, Searcher
from hpcdet.search.space import grid_points, sample

__all__ = [
    "EXIT_CANCELED",
    "EXIT_COMPLETED",
    "EXIT_ERRORED",
    "EXIT_INVALID_HP",
    "EXIT_USER_STOP",
    "MT19937",
    "SEARCH_METHODS",
    "Action",
    "Close",
    "Create",
    "Event",
    "Initialize",
    "OpCompleted",
    "Searcher",
    "Shutdown",
    "Stop",
    "TrialExited",
    "ValidateAfter",
    "ValidationReported",
    "event_from_dict",
    "event_to_dict",
    "grid_points",
    "sample",
]
