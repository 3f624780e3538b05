"""Determined's own Core API client (``determined==0.38.1``) timed as ``bench.report_metrics``
times hpcdet's: ``report_training_metrics`` per call, against a local HTTP server that answers
its POSTs as a master would (minus the database).

Run by ``bench.report_metrics`` with the Python of a bench-only virtualenv that has Determined
installed (``determined_python`` there), never hpcdet's: ``python -m bench.determined_client
N`` prints JSON: the microseconds of each of N calls, the reports the server received, and
close()'s milliseconds.

Determined 0.38 queues each report (a queue of at most 1,000) for a thread that POSTs it: a
call is a log line's formatting and a put, and waits when the queue is full, so a loop that
reports faster than the master answers pays for the POSTs after the first thousand.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
import time

from determined import core  # the bench venv's, not hpcdet's
from determined.common import api

from bench.report_metrics import Sink, time_calls

TRIAL_ID = 1


def main(n: int) -> dict[str, object]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    master = f"http://127.0.0.1:{server.server_address[1]}"
    session = api.Session(master, "bench", "token", None)
    metrics = core._MetricsContext(session, TRIAL_ID, 1)
    train = core.TrainContext(session, TRIAL_ID, 1, metrics, core.DummyDistributedContext(),
                              core.TensorboardMode.MANUAL, None, None)
    metrics.start()

    def report(step: int, m: dict[str, object]) -> None:
        train.report_training_metrics(steps_completed=step, metrics=m)

    warmup = min(1000, n)
    time_calls(warmup, report)
    us = time_calls(n, report, first=warmup + 1)
    t0 = time.perf_counter()
    metrics.close()
    close_ms = (time.perf_counter() - t0) * 1000
    server.shutdown()
    return {"us": us, "received": Sink.received, "sent": warmup + n, "close_ms": close_ms}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]))))
