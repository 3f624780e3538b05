"""adaptive_asha over thousands of simulated trials, in process: the real searcher
(``hpcdet.search.Searcher``, as the daemon feeds it) driven by trials that report a validation
every unit of ``max_time`` until stopped.

Usage: ``python -m bench.asha_sim [TRIALS]`` (default 10000).

The simulation keeps ``max_concurrent_trials`` trials running; each step one running trial
(round robin) reports its next validation, whose loss is a noisy function of its learning
rate and of the time trained. Printed: wall time, searcher decisions per second, and the
time to replay the same events into a new searcher (what a restarted daemon does).
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections import deque
from typing import Any

from bench.figures import Figure
from hpcdet.config.searcher import SearcherConfig
from hpcdet.search import (
    EXIT_COMPLETED,
    Create,
    Initialize,
    Searcher,
    Stop,
    TrialExited,
    ValidationReported,
)

SPACE = {"lr": {"type": "log", "base": 10.0, "minval": -5.0, "maxval": -1.0, "count": None}}


def config(trials: int) -> SearcherConfig:
    return SearcherConfig(name="adaptive_asha", metric="loss", time_metric="batches",
                            max_time=256, max_trials=trials, max_concurrent_trials=64,
                            divisor=4.0, max_rungs=5)


def simulate(trials: int) -> tuple[float, int, list[Any]]:
    """(seconds, decisions, events fed) of one search of ``trials`` trials."""
    searcher = Searcher(config(trials), SPACE, 7)
    length = 256
    noise = random.Random(1)
    running: deque[int] = deque()
    lr: dict[int, float] = {}
    trained: dict[int, int] = {}
    decisions = 0
    fed: list[Any] = []
    start = time.perf_counter()

    def feed(event: Any) -> None:
        nonlocal decisions
        fed.append(event)
        actions = searcher.feed(event)
        decisions += len(actions)
        for a in actions:
            if isinstance(a, Create):
                lr[a.request_id] = a.hparams["lr"]
                trained[a.request_id] = 0
                running.append(a.request_id)
            elif isinstance(a, Stop) and a.request_id in trained:
                trained.pop(a.request_id)
                pending.append(a.request_id)

    pending: list[int] = []
    feed(Initialize())
    while running and not searcher.finished():
        rid = running.popleft()
        if rid not in trained:
            continue
        trained[rid] += 16
        loss = abs(math.log10(lr[rid]) + 3) / math.sqrt(trained[rid]) + noise.random() * 0.01
        feed(ValidationReported(rid, {"loss": loss, "batches": trained[rid]}))
        if rid in trained and trained[rid] >= length:
            trained.pop(rid)
            pending.append(rid)
        if rid in trained:
            running.append(rid)
        while pending:
            feed(TrialExited(pending.pop(), EXIT_COMPLETED))
    assert searcher.finished() and len(lr) >= trials, (len(lr), trials)
    return time.perf_counter() - start, decisions, fed


def measure(trials: int) -> list[Figure]:
    seconds, decisions, fed = simulate(trials)
    start = time.perf_counter()
    Searcher.replay(config(trials), SPACE, 7, fed)
    replay = time.perf_counter() - start
    return [
        Figure("asha_sim", f"adaptive_asha, {trials:,} simulated trials ({len(fed):,} "
               "events): wall time", seconds, "s", target="≤ 10 s", met=seconds <= 10),
        Figure("asha_sim", f"searcher decisions per second ({decisions:,} decisions)",
               decisions / seconds, "decisions/s"),
        Figure("asha_sim", "replaying the same events into a new searcher (daemon restart)",
               replay, "s"),
    ]


if __name__ == "__main__":
    from bench.figures import table

    print(table(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)))
